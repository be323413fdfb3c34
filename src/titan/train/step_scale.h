// What the losses of a training step are scaled by, so that its gradient is the gradient of the
// mean token loss of the whole global batch whatever the layout: the cross-entropy sums over
// the step's global count of valid tokens, the auxiliary losses (means over a forward's tokens)
// over the forwards that make up the step.
#pragma once

#include <ATen/ATen.h>

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

}  // namespace titan::train
