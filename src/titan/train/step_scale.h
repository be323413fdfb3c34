// What the losses of a training step are scaled by, so that its gradient is the gradient of the
// mean token loss of the whole global batch whatever the layout: the cross-entropy sums over
// the step's global count of valid tokens, the auxiliary losses (means over a forward's tokens)
// over the forwards that make up the step. And the step's loss over the ranks, for the log.
#pragma once

#include <ATen/ATen.h>

#include <vector>

#include "titan/data/data_loader.h"
#include "titan/models/parallel_context.h"

namespace titan::train {

struct StepScale {
  at::Tensor divisor;      // float32 scalar on the device: the global count of valid tokens
  double extra_scale = 1;  // the step's forwards x the ranks that read different rows
  bool poison = false;     // test hook (debug.inject_nonfinite_at_step): the loss is NaN

  // The loss one forward's backward starts from: `cross_entropy_sum` / divisor + `auxiliary` /
  // extra_scale, NaN under the test hook. Either may be undefined (a pipeline stage without
  // the head has only its auxiliary part, which the hook leaves alone), not both.
  at::Tensor loss(const at::Tensor& cross_entropy_sum, const at::Tensor& auxiliary) const;
};

// The scale of a step over this rank's `batches` (labels on the host): their valid tokens
// summed over the "loss" ranks (one small all-reduce, no host synchronisation); the auxiliary
// losses (which the model already averages over the ranks that split its tokens) averaged over
// the step's `forwards` on this rank (micro-batches, and pipeline microbatches) and the ranks
// that read different rows.
StepScale step_scale(const std::vector<data::Batch>& batches, models::ParallelContext& parallel,
                     int64_t forwards, at::Device device);

struct StepLoss {
  at::Tensor loss;      // float64 [1]: the step's, summed over the ranks
  at::Tensor max_loss;  // the largest rank's mean token loss over its own tokens
  at::Tensor tokens;    // the global count of valid tokens
};

// torchtitan's global_max_loss (each rank's loss over its own tokens, the largest of them) and
// the step's loss summed, from this rank's part `loss` (what ForwardBackward::run returns).
StepLoss reduce_step_loss(const at::Tensor& loss, const std::vector<data::Batch>& batches,
                          const StepScale& scale, models::ParallelContext& parallel);

}  // namespace titan::train
