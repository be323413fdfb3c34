#include "titan/train/pipeline/pipeline_setup.h"

#include <iostream>
#include <set>
#include <sstream>

#include "titan/common/error.h"
#include "titan/common/strings.h"
#include "titan/train/pipeline/pipeline_forward_backward.h"
#include "titan/train/pipeline/stage_export.h"
#include "titan/train/report/metrics.h"

namespace titan::train {
namespace {

// The specs whose models can be cut into stages, for the refusal's message.
std::string pipelined_specs() {
  std::vector<std::string> names;
  for (const std::string& name : models::model_spec_names())
    if (models::get_model_spec(name).pipeline) names.push_back(name);
  return join(names);
}

}  // namespace

Pipeline::Pipeline(const config::TrainerConfig& cfg, const models::ModelSpec& spec,
                   const models::Model& whole, distributed::MeshContext& parallel,
                   at::Device device)
    : cfg_(cfg),
      spec_(spec),
      parallel_(parallel),
      device_(device),
      rank_(parallel.mesh().rank()),
      world_size_(parallel.degree("world")) {
  const int64_t pp = parallel.degree("pp");
  TITAN_CHECK(spec.pipeline, "parallelism.pipeline_parallel_degree = ", pp,
              ": model.name = ", spec.name, " (", spec.description,
              ") cannot be split into pipeline stages; the models that can: model.name = ",
              pipelined_specs());
  TITAN_CHECK(cfg.model.converters.empty(), "parallelism.pipeline_parallel_degree = ", pp,
              ": model.converters (LoRA) does not run under pipeline parallelism yet");
  const models::ModelShape shape = whole.shape();
  plan_ = distributed::pipeline::plan_pipeline(cfg.parallelism, cfg.training.local_batch_size,
                                               shape.layers);
  TITAN_CHECK(!(shape.tied_embeddings && plan_.placement.v),
              "parallelism.pipeline_parallel_schedule = ", schedule_name(plan_.schedule),
              " puts the first and the last stage on one rank, which a model with tied "
              "embeddings (tie_word_embeddings) cannot run yet; use InterleavedZeroBubble");
}

ModelParts Pipeline::build_stages(const models::BuildOptions& build) const {
  std::vector<ModelParts::Part> stages;
  for (int64_t index : plan_.placement.stages_of(parallel_.coordinate("pp"))) {
    std::unique_ptr<models::Model> stage = spec_.build(cfg_, build);
    spec_.pipeline(*stage, plan_.parts[index]);
    stages.push_back({index, std::move(stage)});
    std::cout << "[titan] rank " << rank_ << " of " << world_size_ << ": pipeline "
              << plan_.describe_stage(index) << " (" << schedule_name(plan_.schedule) << ", "
              << plan_.microbatches << " microbatches of " << plan_.microbatch_size
              << (plan_.microbatch_size == 1 ? " row)" : " rows)") << std::endl;
  }
  return ModelParts(std::move(stages));
}

void Pipeline::hold_stage_tensors(ModelParts& stages) {
  NamedTensors tensors = stages.named_parameters();
  for (auto& b : stages.named_buffers()) tensors.push_back(b);
  std::set<std::string> copies;
  const models::ModelShape shape = stages.shape();
  if (shape.tied_embeddings) copies.insert(shape.embedding_name);
  parallel_.hold_on_stage(tensors, copies);
  std::vector<std::string> names;
  for (const auto& [name, t] : tensors) names.push_back(name);
  stage_tensors_.emplace(*parallel_.mesh().group("pp"), names, device_);
}

HeldElsewhere Pipeline::held_elsewhere() const {
  TITAN_CHECK(stage_tensors_.has_value(), "pipeline: the stages' tensors are not recorded yet");
  const StageTensors* holders = &*stage_tensors_;
  return [holders](const std::string& name) { return holders->held_elsewhere(name); };
}

std::unique_ptr<ForwardBackward> Pipeline::forward_backward(const ModelParts& stages,
                                                            const CausalLmLoss& loss,
                                                            const NamedTensors& params,
                                                            at::ScalarType compute_dtype) {
  // Activations cross stages as [microbatch rows, sequence (this cp rank's part, split over tp
  // under sequence parallelism), hidden]: every rank knows the shape.
  StageTransfer transfer;
  transfer.shape = {plan_.microbatch_size, parallel_.local_sequence(cfg_.training.seq_len),
                    stages.shape().hidden_size};
  transfer.options = at::TensorOptions(device_).dtype(compute_dtype);
  auto schedule = std::make_unique<PipelineForwardBackward>(plan_, stages, loss, parallel_, params,
                                                            std::move(transfer), device_);
  schedule_ = schedule.get();
  return schedule;
}

std::string Pipeline::describe(const ModelParts& stages) const {
  std::string out;
  for (const ModelParts::Part& part : stages.parts())
    out += "; " + plan_.describe_stage(part.stage);
  return out;
}

void Pipeline::restart_timing() {
  if (schedule_ != nullptr) schedule_->take_times();
}

void Pipeline::log_times(const ModelParts& stages) {
  const auto [waited, ran] =
      schedule_ != nullptr ? schedule_->take_times() : std::pair<double, double>{0, 0};
  std::ostringstream line;
  line.setf(std::ios::fixed);
  line.precision(3);
  line << "[titan] rank " << rank_ << " of " << world_size_ << " pipeline "
       << (stages.parts().size() == 1 ? "stage" : "stages");
  std::string sep = " ";
  for (const ModelParts::Part& part : stages.parts()) {
    line << sep << part.stage;
    sep = ", ";
  }
  line << ": waited " << waited << " s of " << ran << " s in the schedules (bubble ";
  line.precision(1);
  line << (ran > 0 ? 100.0 * waited / ran : 0.0) << "%), peak memory ";
  line.precision(3);
  line << peak_memory(device_).first << " GiB";
  std::cout << line.str() << std::endl;
}

checkpoint::NativeTensors Pipeline::export_tensors(ModelParts& stages,
                                                   const checkpoint::TensorLayout& layout) const {
  TITAN_CHECK(stage_tensors_.has_value(), "pipeline: the stages' tensors are not recorded yet");
  return pipeline_parameters(stages, layout, *stage_tensors_, *parallel_.mesh().group("pp"),
                             device_);
}

}  // namespace titan::train
