// The SwiGLU feed-forward of Qwen3 (QWEN3_SPEC.md 2.5): down(silu(gate(x)) * up(x)).
#pragma once

#include <ATen/ATen.h>

namespace titan::models {

// Weights in nn.Linear layout ([out, in]); they are cast to x's dtype at use.
at::Tensor swiglu_mlp(const at::Tensor& x, const at::Tensor& gate_proj, const at::Tensor& up_proj,
                      const at::Tensor& down_proj);

}  // namespace titan::models
