// RMSNorm as Hugging Face Qwen3 computes it (QWEN3_SPEC.md 2.1): statistics in float32, the
// normalised value rounded back to the input dtype *before* the weight multiply.
#pragma once

#include <ATen/ATen.h>

namespace titan::models {

// Normalises over the last dimension. `weight` has that dimension's size and is cast to
// x's dtype (so float32 master weights get their gradient through the cast).
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);

}  // namespace titan::models
