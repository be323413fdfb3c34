// One pipeline stage's share of a step, microbatch by microbatch (torch.distributed.pipelining's
// _PipelineStage, without the transfers: schedule_runner.h moves the tensors): the forward of
// its blocks from the token ids (first stage) or the previous stage's activations (a leaf whose
// gradient goes back), the loss on the last stage, and the backward whole (B) or in two parts,
// to the stage's input (I, for the previous stage at once) and to its weights (W, later). The
// last stage runs its whole backward at I (the loss's kernels scale their saved gradients in
// place, so its graph is run through once) and nothing at W.
//
// Losses, as one process computes them: the last stage's summed token cross-entropy over the
// step's global count of valid tokens. With the MoE auxiliary loss, Hugging Face's
// E * sum_e f_e P_e over every layer is split over the stages: each stage's routing selections
// travel forward with the activations (added up stage after stage) and their totals come back
// with the gradients, so that each stage adds E/N^2 sum_e F_e P_stage,e, whose sum over the
// stages is the loss and whose gradient is the loss's (F has none).
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <vector>

#include "titan/data/data_loader.h"
#include "titan/models/common/decoder.h"
#include "titan/train/loss.h"
#include "titan/train/step_scale.h"

namespace titan::train {

class PipelineStage {
 public:
  enum class Backward { kFull, kInput, kWeight };

  // `loss`: the cross-entropy through the head, on the last stage (nullptr elsewhere).
  PipelineStage(int64_t index, int64_t stages, models::Decoder& model, const CausalLmLoss* loss,
                at::Device device);

  int64_t index() const { return index_; }
  bool first() const { return index_ == 0; }
  bool last() const { return index_ == stages_ - 1; }
  // Whether routing selections travel with the activations (the auxiliary loss), and their size.
  bool routes() const { return routes_; }
  int64_t experts() const { return model_.config().moe.num_experts; }

  // A new step (`scale` set: training) or evaluation (`scale` null: forwards without autograd,
  // the last stage summing its raw cross-entropy). Clears what the last one left.
  void begin(const StepScale* scale);

  // Microbatch `m`: `input` the previous stage's output (not on the first stage), `routing` the
  // selections of the stages before (zeros on the first; only when routes()).
  void forward(int64_t m, const data::Batch& batch, const at::Tensor& input,
               const at::Tensor& routing);
  // What the next stage needs: the output (detached) and the selections so far.
  at::Tensor output(int64_t m) const;
  at::Tensor routing(int64_t m) const;

  // `grad`: the output's gradient (not on the last stage), `totals`: every stage's selections
  // (not on the last stage, only when routes()); a W after an I takes neither.
  void backward(int64_t m, Backward part, const at::Tensor& grad, const at::Tensor& totals);
  // What the previous stage needs: the input's gradient and the selections' totals.
  at::Tensor input_grad(int64_t m) const;
  at::Tensor totals(int64_t m) const;

  // This stage's part of the step's loss (float64 [1]): the last stage's losses, any stage's
  // auxiliary terms; in evaluation the last stage's summed cross-entropy. Resets it.
  at::Tensor take_loss();

 private:
  struct Microbatch {
    at::Tensor input;                // the leaf the forward started from (not on the first stage)
    at::Tensor output;               // the activations for the next stage (not on the last)
    at::Tensor routing;              // [E] float32 selections of this and the earlier stages
    at::Tensor totals;               // [E] float32 selections of every stage
    models::LoadBalancingSums sums;  // this stage's (probabilities with their graph)
    std::vector<at::Tensor> roots, grads;  // where the backward starts, once known
    at::Tensor input_grad;
    bool backward_done = false;
  };
  Microbatch& at_microbatch(int64_t m);
  const Microbatch& at_microbatch(int64_t m) const;
  // The auxiliary term of this stage given every stage's selections (undefined without one).
  at::Tensor auxiliary_term(const Microbatch& mb, const at::Tensor& totals) const;
  void add_loss(const at::Tensor& value);

  int64_t index_, stages_;
  models::Decoder& model_;
  const CausalLmLoss* loss_;
  at::Device device_;
  bool routes_ = false;
  int64_t sparse_layers_ = 0, local_sparse_layers_ = 0;
  const StepScale* scale_ = nullptr;
  std::map<int64_t, Microbatch> microbatches_;
  at::Tensor loss_sum_;
};

}  // namespace titan::train
