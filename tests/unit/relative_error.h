// max |a - b| / max |b|, in float64 on the CPU: normwise, so elements near zero do not dominate
// (0 against 0 is 0). The kernel tests' measure of closeness to a reference.
#pragma once

#include <ATen/ATen.h>

namespace titan::testing {

inline double relative_error(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor a64 = a.detach().to(at::kCPU, at::kDouble);
  const at::Tensor b64 = b.detach().to(at::kCPU, at::kDouble);
  const double scale = b64.abs().max().item<double>();
  const double diff = (a64 - b64).abs().max().item<double>();
  return scale == 0 ? diff : diff / scale;
}

}  // namespace titan::testing
