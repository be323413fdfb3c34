#include "titan/train/pipeline/pipeline_stage.h"

#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/autograd.h>

#include "titan/common/error.h"
#include "titan/train/loader_options.h"

namespace titan::train {

PipelineStage::PipelineStage(int64_t index, int64_t stages, models::StageForward& model,
                             const CausalLmLoss* loss, at::Device device)
    : index_(index),
      stages_(stages),
      model_(model),
      loss_(loss),
      device_(device),
      carried_shapes_(model.carried_shapes()) {
  TITAN_CHECK(!last() || loss_ != nullptr, "pipeline: the last stage needs the loss");
}

void PipelineStage::begin(const StepScale* scale) {
  scale_ = scale;
  microbatches_.clear();
  loss_sum_ = at::zeros({1}, at::TensorOptions(device_).dtype(at::kDouble));
}

PipelineStage::Microbatch& PipelineStage::at_microbatch(int64_t m) { return microbatches_[m]; }

const PipelineStage::Microbatch& PipelineStage::at_microbatch(int64_t m) const {
  auto it = microbatches_.find(m);
  TITAN_CHECK(it != microbatches_.end(), "pipeline: stage ", index_, " has no microbatch ", m,
              " in flight");
  return it->second;
}

void PipelineStage::add_loss(const at::Tensor& value) {
  loss_sum_.add_(value.detach().to(at::kDouble).reshape({1}));
}

void PipelineStage::forward(int64_t m, const data::Batch& batch, const at::Tensor& input,
                            const std::vector<at::Tensor>& carried) {
  Microbatch& mb = at_microbatch(m);
  models::StageInput in;
  if (first()) {
    in.tokens = batch.inputs.to(device_);
  } else {
    TITAN_CHECK(input.defined(), "pipeline: stage ", index_, " got no input for microbatch ", m);
    // A leaf of this stage's graph: its gradient is what goes back to the previous stage.
    mb.input = input.detach().requires_grad_(scale_ != nullptr);
    in.hidden = mb.input;
    in.sequence_length = batch.inputs.size(1);  // the input may hold a part of it (tp)
  }
  const models::PackedDocuments documents = packed_documents(batch, device_);
  in.positions = documents.positions;
  in.document_ids = documents.document_ids;
  in.positions_end = documents.positions_end;  // a context-parallel rank's part of the rows
  models::StageOutput out = model_.forward_stage(in);
  // What is carried travels in evaluation too (every rank posts the same transfers).
  TITAN_CHECK(out.carried.size() == carried_shapes_.size() &&
                  (first() || carried.size() == carried_shapes_.size()),
              "pipeline: stage ", index_, " carries ", out.carried.size(), " tensors, ",
              carried_shapes_.size(), " expected");
  mb.carried.clear();
  for (size_t i = 0; i < carried_shapes_.size(); ++i) {
    const at::Tensor before =
        first() ? at::zeros(carried_shapes_[i], at::TensorOptions(device_).dtype(at::kFloat))
                : carried[i].to(device_, at::kFloat);
    mb.carried.push_back(before + out.carried[i].to(device_));
  }
  if (scale_ == nullptr) {  // evaluation: the raw cross-entropy, nothing kept
    if (last())
      add_loss(loss_->sum(out.hidden, batch.labels));
    else
      mb.output = out.hidden;
    return;
  }
  mb.auxiliary = std::move(out.auxiliary);
  if (!last()) {
    mb.output = out.hidden;
    return;
  }
  mb.totals = mb.carried;
  const at::Tensor loss = scale_->loss(loss_->sum(out.hidden, batch.labels), auxiliary_term(mb));
  add_loss(loss);
  mb.roots = {loss};
  mb.grads = {at::Tensor()};
}

at::Tensor PipelineStage::auxiliary_term(const Microbatch& mb) const {
  return mb.auxiliary ? mb.auxiliary(mb.totals) : at::Tensor();
}

at::Tensor PipelineStage::output(int64_t m) const { return at_microbatch(m).output.detach(); }

const std::vector<at::Tensor>& PipelineStage::carried(int64_t m) const {
  return at_microbatch(m).carried;
}

void PipelineStage::backward(int64_t m, Backward part, const at::Tensor& grad,
                             const std::vector<at::Tensor>& totals) {
  Microbatch& mb = at_microbatch(m);
  if (mb.backward_done) return;  // a last stage's W: its I was the whole backward (below)
  if (mb.roots.empty()) {        // a non-last stage's first backward action for this microbatch
    TITAN_CHECK(grad.defined(), "pipeline: stage ", index_, " got no gradient for microbatch ", m);
    TITAN_CHECK(totals.size() == carried_shapes_.size(), "pipeline: stage ", index_, " got ",
                totals.size(), " totals for microbatch ", m, ", ", carried_shapes_.size(),
                " expected");
    mb.roots = {mb.output};
    mb.grads = {grad.to(mb.output.scalar_type())};
    mb.totals = totals;
    const at::Tensor aux = auxiliary_term(mb);
    if (aux.defined()) {
      const at::Tensor term = scale_->loss({}, aux);
      add_loss(term);
      mb.roots.push_back(term);
      mb.grads.push_back(at::ones_like(term));
    }
  }
  // The last stage's I is its whole backward and its W nothing (PyTorch merges them too): the
  // loss's kernel scales its saved gradients in place and cannot be run through twice.
  if (part == Backward::kInput && last()) part = Backward::kFull;
  if (part == Backward::kInput) {
    // The first stage's input needs no gradient: its whole backward waits for W.
    if (first()) return;
    mb.input_grad = torch::autograd::grad(mb.roots, {mb.input}, mb.grads, /*retain_graph=*/true)[0];
    return;
  }
  // B, or W after I: the whole backward from the roots (W recomputes the input's gradient,
  // which nothing reads; the weights' gradients need most of the same graph anyway).
  torch::autograd::backward(mb.roots, mb.grads);
  if (part == Backward::kFull && !first()) mb.input_grad = mb.input.grad();
  mb.backward_done = true;
  // The graph is freed; what the previous stage still needs stays.
  mb.roots.clear();
  mb.grads.clear();
  mb.output = at::Tensor();
  mb.auxiliary = nullptr;
  mb.input = at::Tensor();
}

at::Tensor PipelineStage::input_grad(int64_t m) const {
  const at::Tensor& g = at_microbatch(m).input_grad;
  TITAN_CHECK(g.defined(), "pipeline: stage ", index_, " has no input gradient for microbatch ", m);
  return g;
}

const std::vector<at::Tensor>& PipelineStage::totals(int64_t m) const {
  return at_microbatch(m).totals;
}

at::Tensor PipelineStage::take_loss() {
  at::Tensor out = loss_sum_;
  loss_sum_ = at::zeros({1}, at::TensorOptions(device_).dtype(at::kDouble));
  return out;
}

}  // namespace titan::train
