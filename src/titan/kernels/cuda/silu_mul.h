// The fused SwiGLU activation as an autograd op, shared by the dense feed-forward (swiglu.cpp)
// and the MoE experts (moe_experts.cpp).
#pragma once

#include <ATen/ATen.h>

namespace titan::kernels::cuda {

// h [N, 2I] = [gate | up] on a CUDA device -> silu(gate) * up [N, I], with autograd.
at::Tensor silu_mul(const at::Tensor& h);

}  // namespace titan::kernels::cuda
