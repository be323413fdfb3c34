#include "titan/train/pipeline/pipeline_forward_backward.h"

#include <ATen/core/grad_mode.h>

#include "titan/common/error.h"
#include "titan/train/pipeline/microbatches.h"
#include "titan/train/pipeline/tied_embedding.h"

namespace titan::train {

PipelineForwardBackward::PipelineForwardBackward(const distributed::pipeline::PipelinePlan& plan,
                                                 const ModelParts& stages, const CausalLmLoss& loss,
                                                 distributed::MeshContext& parallel,
                                                 const NamedTensors& params, StageTransfer transfer,
                                                 at::Device device)
    : plan_(plan),
      rank_(parallel.coordinate("pp")),
      parallel_(parallel),
      params_(params),
      device_(device) {
  std::vector<PipelineStage*> raw;
  for (const ModelParts::Part& part : stages.parts()) {
    const int64_t index = part.stage;
    models::StageForward* forward = part.model->stage_forward();
    TITAN_CHECK(forward != nullptr, "pipeline: stage ", index, " has no stage forward");
    const bool last = index == plan.stages() - 1;
    stages_.push_back(std::make_unique<PipelineStage>(index, plan.stages(), *forward,
                                                      last ? &loss : nullptr, device));
    raw.push_back(stages_.back().get());
    // A tied model's first and last stages (on pipeline ranks 0 and pp - 1) each hold the
    // embedding table.
    const models::ModelShape shape = part.model->shape();
    if (shape.tied_embeddings && (index == 0 || last)) {
      for (const auto& [name, p] : params)
        if (name == shape.embedding_name) tied_ = p;
      tied_peer_ = plan.placement.rank_of(index == 0 ? plan.stages() - 1 : 0);
    }
  }
  TITAN_CHECK(!tied_.defined() || tied_peer_ != rank_,
              "pipeline: the first and the last stage of a model with tied embeddings are both "
              "on pipeline rank ",
              rank_, "; use a schedule that places them apart");
  runner_ = std::make_unique<ScheduleRunner>(raw, plan.placement, *parallel.mesh().group("pp"),
                                             std::move(transfer));
}

at::Tensor PipelineForwardBackward::stage_losses() {
  at::Tensor sum = at::zeros({1}, at::TensorOptions(device_).dtype(at::kDouble));
  for (auto& s : stages_) sum.add_(s->take_loss());
  return sum;
}

at::Tensor PipelineForwardBackward::run(const std::vector<data::Batch>& batches,
                                        const StepScale& scale) {
  at::Tensor loss = at::zeros({1}, at::TensorOptions(device_).dtype(at::kDouble));
  ScheduleRunner::BackwardHooks hooks;
  hooks.before = [this](bool last) { parallel_.start_backward(last); };
  hooks.after = [this](bool last) { parallel_.finish_backward(last, params_); };
  for (size_t i = 0; i < batches.size(); ++i) {
    for (auto& s : stages_) s->begin(&scale);
    runner_->run(plan_.training.at(static_cast<size_t>(rank_)),
                 split_microbatches(batches[i], plan_.microbatches), hooks,
                 /*last_round=*/i + 1 == batches.size());
    loss.add_(stage_losses());
  }
  if (tied_.defined())
    sum_tied_gradients(tied_, *parallel_.mesh().group("pp"), tied_peer_,
                       /*sends_first=*/rank_ < tied_peer_);
  // Every stage's part of the loss: the same sum on each stage of these rows.
  parallel_.all_reduce("pipeline", loss);
  return loss;
}

std::pair<double, double> PipelineForwardBackward::evaluate(const data::Batch& batch) {
  at::NoGradGuard no_grad;
  for (auto& s : stages_) s->begin(nullptr);
  runner_->run(plan_.validation.at(static_cast<size_t>(rank_)),
               split_microbatches(batch, plan_.microbatches), {}, false);
  at::Tensor loss = stage_losses();
  parallel_.all_reduce("pipeline", loss);
  return {loss.item<double>(), static_cast<double>(count_valid_tokens(batch.labels))};
}

}  // namespace titan::train
