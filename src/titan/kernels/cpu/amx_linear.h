// The dense projection under bfloat16 compute on float32 master weights
// (training.mixed_precision_param bfloat16), on Intel AMX: y = x W^T with x in bfloat16 and W
// in float32. The weight is rounded to bfloat16 a strip at a time inside the kernels
// (amx_matmul.h), never as a whole bfloat16 copy; its gradient dW = dy^T x is summed in float32
// and written in float32, the master weight's dtype (no bfloat16 gradient rounded and then cast,
// as a bfloat16 GEMM followed by the cast back would give). dx = dy W is bfloat16. Each bfloat16
// output is its float32 sum rounded once. See docs/kernels.md.
#pragma once

#include <ATen/ATen.h>

namespace titan::kernels::cpu {

// Whether amx_linear takes these: x bfloat16 on the CPU, weight float32, 2-D and contiguous with
// both sides multiples of 64, on a CPU with AMX.
bool amx_linear_supports(const at::Tensor& x, const at::Tensor& weight);

// x [..., in] (bfloat16), weight [out, in] (float32) -> [..., out] (bfloat16); differentiable in
// both (the weight's gradient float32).
at::Tensor amx_linear(const at::Tensor& x, const at::Tensor& weight);

// Whether the products below take this weight (float32 or bfloat16, 2-D, contiguous, both sides
// multiples of 64) on this CPU (AMX).
bool amx_matmul_supports(const at::Tensor& weight);

// The three products alone, for kernels that hold their operands themselves (the CPU
// cross-entropy's head, tests); the weight float32 or bfloat16.
// y [M, N] = x [M, K] @ W^T, W [N, K]; into `y` (bfloat16 [M, N], unit column stride).
at::Tensor amx_mixed_forward(const at::Tensor& x, const at::Tensor& weight);
void amx_mixed_forward_out(const at::Tensor& x, const at::Tensor& weight, at::Tensor& y);
// dx [M, K] = dy [M, N] @ W.
at::Tensor amx_mixed_backward(const at::Tensor& dy, const at::Tensor& weight);
// dW [N, K] (float32) = dy [M, N]^T @ x [M, K], written into `out` (float32 [N, K],
// contiguous), or added to it with `accumulate`.
void amx_weight_grad(const at::Tensor& dy, const at::Tensor& x, at::Tensor& out,
                     bool accumulate = false);

}  // namespace titan::kernels::cpu
