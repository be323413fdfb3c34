// x W^T (+ b): the dense projection of the native model and of reference's SwiGLU.
//
// The weight and bias may be float32 master copies of a bfloat16 input: they are cast to x's
// dtype, except where the CPU has AMX and the weight's sides are multiples of 64, where
// cpu/amx_linear.h multiplies by the float32 weight itself (rounding it to bfloat16 a strip at a
// time, its gradient in float32).
//
// On the CPU in float32 both the forward GEMM and the backward's two run on oneDNN
// (kernels/cpu/gemm.h: about twice MKL's sgemm, which at::linear uses, on CPUs where MKL does
// not use AVX-512), through an autograd function of its own; everywhere else (CUDA, bfloat16,
// a torch without oneDNN) it is at::linear. The arithmetic is float32 either way: only the
// order of the sums differs. See docs/kernels.md.
#pragma once

#include <ATen/ATen.h>

namespace titan::kernels {

// x [..., in], weight [out, in] (in x's dtype or float32), bias [out] or undefined ->
// [..., out] in x's dtype.
at::Tensor linear(const at::Tensor& x, const at::Tensor& weight,
                  const at::Tensor& bias = at::Tensor());

}  // namespace titan::kernels
