// Gradient clipping by the global L2 norm, as torch.nn.utils.clip_grad_norm_ (foreach path):
// per-tensor norms with one _foreach_norm per (device, dtype), the norm of those norms, then
// every gradient scaled by max_norm / (norm + 1e-6) when that is below 1, the coefficient
// computed from the float32 norm with torch's ops (torch.nn.utils.clip_grads_with_norm_).
//
// One difference: the norms accumulate in float64. torch's float32 reduction on the CPU loses
// precision on large tensors (1.9% on a 39M-entry gradient whose rows differ in scale), and a
// norm that depends on how the gradients are sharded would make runs of different data-parallel
// layouts disagree.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <vector>

namespace titan::train {

// The sum of squares of every entry of the defined gradients of `params`, a float64 scalar on
// the first gradient's device (0 when there is none). No host synchronisation.
at::Tensor total_grad_squares(const std::vector<at::Tensor>& params);
// Its square root as a float32 scalar: the global L2 norm.
at::Tensor total_grad_norm(const std::vector<at::Tensor>& params);

// Scales the gradients in place by min(1, max_norm / (total_norm + 1e-6)). `total_norm` may
// come from total_grad_norm or be combined across ranks (sqrt of the all-reduced squares).
void clip_grads_with_norm(const std::vector<at::Tensor>& params, double max_norm,
                          const at::Tensor& total_norm);

// Both of the above; returns the norm before clipping. max_norm <= 0 only measures. With
// `reduce_squares`, the local sum of squares (float64) is combined across ranks by it (in
// place) before the square root: the global norm of gradients sharded over ranks.
double clip_grad_norm(const std::vector<at::Tensor>& params, double max_norm,
                      const std::function<void(at::Tensor&)>& reduce_squares = nullptr);
// The same from the global sum of squares already computed (a float64 tensor of one entry, e.g.
// grad_norm.h's, which sums each placement's squares over its own groups).
double clip_grad_norm_with_squares(const std::vector<at::Tensor>& params, double max_norm,
                                   const at::Tensor& global_squares);

}  // namespace titan::train
