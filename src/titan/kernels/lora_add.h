// The LoRA adapter's term added to a projection's output in one autograd node:
//
//   lora_add(y, x, A, B, scale) = y + (x A^T) B^T * scale
//
// as one GEMM that accumulates into y (addmm: y read once, the sum written once), the scale
// folded into the rank-r intermediate h = x A^T (r columns, so its multiply is a few thousand
// elements) rather than applied to the [tokens, out] product. Computed op by op, as PEFT and
// common/lora.h's lora_term do, the term costs two GEMMs, a multiply and an add over
// [tokens, out] in the forward and the multiply's gradient in the backward; on the CPU each of
// those element-wise ops is a parallel region over the activations, which is what a QLoRA step
// at real widths spends much of its time in (bench/RESULTS.md, "The step against the machine's
// GEMM ceiling").
//
// The backward gives dy to y unchanged (no copy) and the adapter's three products:
// g = dy B * scale, dx = g A, dA = g^T x, dB = dy^T h * scale, the adapters' gradients in their
// own dtype (float32 master weights under bfloat16 compute). With a scale that is a power of two
// (alpha / r = 2 in the usual configurations) the backward's products are bit for bit those of
// the op-by-op term; the forward rounds the sum once instead of three times. Works on any
// device (ATen's GEMMs only). See docs/kernels.md.
#pragma once

#include <ATen/ATen.h>

namespace titan::kernels {

// y [..., out] (x's dtype), x [..., in], a [r, in], b [out, r] (any floating dtype: cast to x's)
// -> y + (x a^T) b^T * scale, in x's dtype; differentiable in y, x, a and b.
at::Tensor lora_add(const at::Tensor& y, const at::Tensor& x, const at::Tensor& a,
                    const at::Tensor& b, double scale);

}  // namespace titan::kernels
