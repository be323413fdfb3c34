#include "titan/models/common/rms_norm.h"

namespace titan::models {

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  const at::Tensor x32 = x.to(at::kFloat);
  const at::Tensor inv_rms = at::rsqrt(x32.pow(2).mean({-1}, /*keepdim=*/true) + eps);
  return weight.to(x.scalar_type()) * (x32 * inv_rms).to(x.scalar_type());
}

}  // namespace titan::models
