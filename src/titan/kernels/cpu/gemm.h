// Matrix products of the CPU kernels. float32 goes to oneDNN's matmul (the library ATen uses
// for bfloat16 on the CPU): ATen's float32 at::mm calls MKL's sgemm, which on some x86 CPUs
// (AMD's, where MKL does not use its AVX-512 code) runs at about half of oneDNN's speed on the
// same shapes, with the same float32 arithmetic (bench/RESULTS.md). Products under 2^18
// multiply-adds (where oneDNN's per-call cost dominates), other dtypes, and a torch built without
// oneDNN take ATen's at::mm. See docs/kernels.md.
#pragma once

#include <ATen/ATen.h>

namespace titan::kernels::cpu {

// out = a @ b, or out += a @ b with `accumulate`: a [M, K], b [K, N], out [M, N], all on the
// CPU in one dtype; any strides (transposed and narrowed views included). With accumulate
// false, what `out` held before is never read (it may be uninitialised).
void gemm_out(const at::Tensor& a, const at::Tensor& b, const at::Tensor& out,
              bool accumulate = false);

// a @ b into a new [M, N] tensor.
at::Tensor gemm(const at::Tensor& a, const at::Tensor& b);

// Whether this build runs float32 GEMMs on oneDNN at all (false: always ATen's at::mm).
bool gemm_uses_onednn();

// Whether gemm_out(a, b, out) runs on oneDNN (false: ATen's at::mm).
bool gemm_runs_on_onednn(const at::Tensor& a, const at::Tensor& b, const at::Tensor& out);

}  // namespace titan::kernels::cpu
