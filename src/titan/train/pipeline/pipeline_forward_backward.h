// The training step's forward and backward under pipeline parallelism: each batch the step
// reads is cut into the pipeline's microbatches and run through this rank's schedule (the
// schedule takes the place of the micro-batch loop; gradient accumulation still loops over
// batches, one schedule each), then a tied embedding's two copies sum their gradients.
// Validation runs the forward-only schedule. The losses come back summed over the stages, so
// every stage of a row reports the same values.
#pragma once

#include <memory>

#include "titan/distributed/mesh_context.h"
#include "titan/distributed/pipeline/pipeline_plan.h"
#include "titan/train/forward_backward.h"
#include "titan/train/model_parts.h"
#include "titan/train/pipeline/pipeline_stage.h"
#include "titan/train/pipeline/schedule_runner.h"

namespace titan::train {

class PipelineForwardBackward : public ForwardBackward {
 public:
  // `stages`: this rank's (pipeline rank `rank` of `plan`); `loss` the head's (used on the last
  // stage); `params` the optimizer's. All must outlive this.
  PipelineForwardBackward(const distributed::pipeline::PipelinePlan& plan, const ModelParts& stages,
                          const CausalLmLoss& loss, distributed::MeshContext& parallel,
                          const NamedTensors& params, StageTransfer transfer, at::Device device);

  at::Tensor run(const std::vector<data::Batch>& batches, const StepScale& scale) override;
  std::pair<double, double> evaluate(const data::Batch& batch) override;

  // Seconds this rank waited for transfers, and ran schedules, since the last call.
  std::pair<double, double> take_times() { return runner_->take_times(); }

 private:
  at::Tensor stage_losses();

  const distributed::pipeline::PipelinePlan& plan_;
  int64_t rank_;
  distributed::MeshContext& parallel_;
  const NamedTensors& params_;
  at::Device device_;
  std::vector<std::unique_ptr<PipelineStage>> stages_;
  std::unique_ptr<ScheduleRunner> runner_;
  at::Tensor tied_;  // the tied embedding this rank holds on the first or last stage, if any
  int64_t tied_peer_ = -1;
};

}  // namespace titan::train
