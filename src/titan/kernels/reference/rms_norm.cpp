// RMSNorm as Hugging Face Qwen3 computes it: statistics in float32, the normalised value
// rounded back to the input dtype *before* the weight multiply.
#include "titan/kernels/reference/reference.h"

namespace titan::kernels::reference {

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  // For float32 input .to() returns x itself, and x would feed two autograd nodes (the square
  // and the scaling). The view gives x a single use, so its gradient sums associate the same
  // way whether or not this norm is recomputed in backward (op-level activation checkpointing
  // then stays bit-identical to the plain model).
  const at::Tensor x32 = x.scalar_type() == at::kFloat ? x.view_as(x) : x.to(at::kFloat);
  const at::Tensor inv_rms = at::rsqrt(x32.pow(2).mean({-1}, /*keepdim=*/true) + eps);
  return weight.to(x.scalar_type()) * (x32 * inv_rms).to(x.scalar_type());
}

}  // namespace titan::kernels::reference
