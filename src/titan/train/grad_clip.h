// Gradient clipping by the global L2 norm, as torch.nn.utils.clip_grad_norm_ (foreach path):
// the global norm of every gradient, then every gradient scaled with one _foreach_mul_ by
// max_norm / (norm + 1e-6) when that is below 1, the coefficient computed from the float32
// norm with torch's ops (torch.nn.utils.clip_grads_with_norm_).
//
// One difference: the sum of squares is exact to float64 rounding. torch's float32 reduction on
// the CPU loses precision on large tensors (1.9% on a 39M-entry gradient whose rows differ in
// scale), and a norm that depends on how the gradients are sharded would make runs of different
// data-parallel layouts disagree. On the CPU each tensor is summed in fixed blocks of
// kSquaresBlock entries, every square and every block's partial sum in float64 (a float32 value
// squares exactly in float64), the blocks and then the tensors added in a fixed order; one pass
// over all the tensors, with no float64 copy of any of them. On other devices the per-tensor
// norms come from one _foreach_norm per (device, dtype) in float64. The result does not depend
// on the thread count; docs/distributed.md says why the layouts agree.
#pragma once

#include <ATen/ATen.h>

#include <vector>

namespace titan::train {

// Entries per block of the CPU sum of squares.
inline constexpr int64_t kSquaresBlock = 4096;

// The sum of the squares of every entry of the defined gradients of `params` (float32 or
// bfloat16; others are summed through _foreach_norm), a float64 scalar on the first gradient's
// device (0 when there is none). No host synchronisation. This is a rank's local part: sharded
// gradients add theirs over their process groups (grad_norm.h) before the square root.
at::Tensor total_grad_squares(const std::vector<at::Tensor>& params);

// The norm of a step and what to scale the gradients by, both float32 scalars on the
// gradients' device: coefficient = min(1, max_norm / (norm + 1e-6)), or 1 when max_norm <= 0
// (measure only), from the global sum of squares (a float64 tensor of one entry, grad_norm.h's,
// which sums each placement's squares over its own process groups). Computed without a host
// synchronisation.
struct GradNorm {
  at::Tensor norm;
  at::Tensor coefficient;
};
GradNorm grad_norm_of_squares(const at::Tensor& squares, double max_norm);

// Scales the gradients in place by `coefficient` (a float32 scalar tensor), one _foreach_mul_
// per (device, dtype).
void scale_grads(const std::vector<at::Tensor>& params, const at::Tensor& coefficient);

}  // namespace titan::train
