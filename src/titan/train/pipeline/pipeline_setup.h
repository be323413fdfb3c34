// Pipeline parallelism in one place, as torchtitan's pipeline_llm gathers it: the plan every
// rank computes alike, this rank's stages cut from the model through its spec
// (ModelSpec::pipeline) and seen through the model interface only (models/model.h:
// StageForward, ModelShape), which rank holds which tensor once parallelize has split them,
// the step's forward-backward by the schedule (the activations' shape computed here), the bubble
// log and the Hugging Face export gathered from the stages (docs/distributed.md, "Pipeline
// parallelism"). The trainer calls it at its set-up points and holds the parts it returns.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "titan/checkpoint/hf_export.h"
#include "titan/config/trainer_config.h"
#include "titan/distributed/mesh_context.h"
#include "titan/distributed/pipeline/pipeline_plan.h"
#include "titan/models/model_spec.h"
#include "titan/train/forward_backward.h"
#include "titan/train/model_parts.h"
#include "titan/train/pipeline/stage_tensors.h"
#include "titan/train/state/checkpoint_parts.h"

namespace titan::train {

class PipelineForwardBackward;

class Pipeline {
 public:
  // The plan for `whole` (built as shapes; only its numbers are read), after the refusals, each
  // naming the setting: a spec that cannot be split (naming those that can), LoRA, a tied
  // model under a schedule that puts the first and last stages on one rank. All must outlive
  // this.
  Pipeline(const config::TrainerConfig& cfg, const models::ModelSpec& spec,
           const models::Model& whole, distributed::MeshContext& parallel, at::Device device);

  // This rank's stages, each built by the spec as shapes (`build`) and cut to its parts, with
  // one start-up line each.
  ModelParts build_stages(const models::BuildOptions& build) const;

  // After parallelize: every tensor of this rank's stages is recorded as its stage's (each
  // stage writes its own to checkpoints; a tied model's last stage holds a copy of the first
  // stage's embedding table), and which rank holds which tensor is learnt once (a collective).
  void hold_stage_tensors(ModelParts& stages);
  // Whether a tensor of the whole model is held by another rank only (a checkpoint holds every
  // stage's tensors; each rank loads its own). After hold_stage_tensors.
  HeldElsewhere held_elsewhere() const;

  // The step's forwards and backwards by the schedule over this rank's stages, the activations
  // [microbatch rows, this rank's part of the sequence, hidden] crossing in `compute_dtype`.
  // `loss` the head's (used on the last stage), `params` the optimizer's; all must outlive it.
  std::unique_ptr<ForwardBackward> forward_backward(const ModelParts& stages,
                                                    const CausalLmLoss& loss,
                                                    const NamedTensors& params,
                                                    at::ScalarType compute_dtype);

  // Forwards per batch (the step's auxiliary losses are averaged over them).
  int64_t microbatches() const { return plan_.microbatches; }
  // "; stage 1 of 4: layers 2-3" for each stage this rank holds.
  std::string describe(const ModelParts& stages) const;

  // After the first step (slow: allocation, first collectives): the bubble is measured from
  // the next one on.
  void restart_timing();
  // One line per rank: its wait for transfers over its time in the schedules (its share of the
  // bubble) since restart_timing, and its peak memory (what bench/pipeline_schedules.py reads).
  void log_times(const ModelParts& stages);

  // The whole model's parameters for the Hugging Face export, each gathered from a stage that
  // holds it (stage_export.h): every rank takes part, the coordinator writes.
  checkpoint::NativeTensors export_tensors(ModelParts& stages,
                                           const checkpoint::TensorLayout& layout) const;

 private:
  const config::TrainerConfig& cfg_;
  const models::ModelSpec& spec_;
  distributed::MeshContext& parallel_;
  at::Device device_;
  distributed::pipeline::PipelinePlan plan_;
  int64_t rank_ = 0, world_size_ = 1;
  std::optional<StageTensors> stage_tensors_;
  PipelineForwardBackward* schedule_ = nullptr;  // what forward_backward() returned
};

}  // namespace titan::train
