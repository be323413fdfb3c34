// One pipeline stage's share of a step, microbatch by microbatch (torch.distributed.pipelining's
// _PipelineStage, without the transfers: schedule_runner.h moves the tensors): the forward of
// its blocks from the token ids (first stage) or the previous stage's activations (a leaf whose
// gradient goes back), the loss on the last stage, and the backward whole (B) or in two parts,
// to the stage's input (I, for the previous stage at once) and to its weights (W, later). The
// last stage runs its whole backward at I (the loss's kernels scale their saved gradients in
// place, so its graph is run through once) and nothing at W.
//
// Losses, as one process computes them: the last stage's summed token cross-entropy over the
// step's global count of valid tokens. An auxiliary loss over every layer (the MoE one) is split
// over the stages by the model (models/model.h, StageOutput): what each stage carries travels
// forward with the activations, added up stage after stage, the totals come back with the
// gradients, and each stage adds its part of the loss given the totals. The stage knows nothing
// of what is carried.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <map>
#include <vector>

#include "titan/data/data_loader.h"
#include "titan/models/model.h"
#include "titan/train/loss.h"
#include "titan/train/step_scale.h"

namespace titan::train {

class PipelineStage {
 public:
  enum class Backward { kFull, kInput, kWeight };

  // `loss`: the cross-entropy through the head, on the last stage (nullptr elsewhere).
  PipelineStage(int64_t index, int64_t stages, models::StageForward& model,
                const CausalLmLoss* loss, at::Device device);

  int64_t index() const { return index_; }
  bool first() const { return index_ == 0; }
  bool last() const { return index_ == stages_ - 1; }
  // The shapes of what travels with the activations (float32; the same on every stage).
  const std::vector<std::vector<int64_t>>& carried_shapes() const { return carried_shapes_; }

  // A new step (`scale` set: training) or evaluation (`scale` null: forwards without autograd,
  // the last stage summing its raw cross-entropy). Clears what the last one left.
  void begin(const StepScale* scale);

  // Microbatch `m`: `input` the previous stage's output (not on the first stage), `carried` the
  // sums of the stages before (none on the first, which starts from zeros).
  void forward(int64_t m, const data::Batch& batch, const at::Tensor& input,
               const std::vector<at::Tensor>& carried);
  // What the next stage needs: the output (detached) and the sums so far.
  at::Tensor output(int64_t m) const;
  const std::vector<at::Tensor>& carried(int64_t m) const;

  // `grad`: the output's gradient, `totals`: every stage's sums (neither on the last stage); a W
  // after an I takes neither.
  void backward(int64_t m, Backward part, const at::Tensor& grad,
                const std::vector<at::Tensor>& totals);
  // What the previous stage needs: the input's gradient and the totals.
  at::Tensor input_grad(int64_t m) const;
  const std::vector<at::Tensor>& totals(int64_t m) const;

  // This stage's part of the step's loss (float64 [1]): the last stage's losses, any stage's
  // auxiliary terms; in evaluation the last stage's summed cross-entropy. Resets it.
  at::Tensor take_loss();

 private:
  struct Microbatch {
    at::Tensor input;                 // the leaf the forward started from (not on the first stage)
    at::Tensor output;                // the activations for the next stage (not on the last)
    std::vector<at::Tensor> carried;  // the sums of this and the earlier stages
    std::vector<at::Tensor> totals;   // the sums of every stage
    // This stage's part of the auxiliary loss given the totals (holds its graph until the
    // backward).
    std::function<at::Tensor(const std::vector<at::Tensor>&)> auxiliary;
    std::vector<at::Tensor> roots, grads;  // where the backward starts, once known
    at::Tensor input_grad;
    bool backward_done = false;
  };
  Microbatch& at_microbatch(int64_t m);
  const Microbatch& at_microbatch(int64_t m) const;
  // This stage's auxiliary term given every stage's sums (undefined without one).
  at::Tensor auxiliary_term(const Microbatch& mb) const;
  void add_loss(const at::Tensor& value);

  int64_t index_, stages_;
  models::StageForward& model_;
  const CausalLmLoss* loss_;
  at::Device device_;
  std::vector<std::vector<int64_t>> carried_shapes_;
  const StepScale* scale_ = nullptr;
  std::map<int64_t, Microbatch> microbatches_;
  at::Tensor loss_sum_;
};

}  // namespace titan::train
