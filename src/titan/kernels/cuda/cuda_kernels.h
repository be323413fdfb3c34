// Hand-written CUDA kernels (implementation "fused" of their ops on CUDA devices), compiled only
// with TITAN_CUDA=ON. This header names no CUDA type, so code outside kernels/cuda includes it
// without the CUDA toolkit's headers. Each op is an autograd function with its own backward;
// the kernels themselves are in the .cu files beside it (declared in launchers.h). Checked
// against `reference` in tests/unit/kernels/fused_kernels_test.cpp. See docs/kernels.md.
#pragma once

#include "titan/kernels/ops.h"

namespace titan::kernels::cuda {

// One block per row: the statistics, the normalised row and the weight multiply in one pass.
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);

// One kernel applies the rotation to q and k (and one kernel undoes it, in backward).
RotatedQueryKey rope(const at::Tensor& q, const at::Tensor& k, const at::Tensor& cos,
                     const at::Tensor& sin);

// gate and up as one GEMM, silu(gate) * up fused into one elementwise kernel, then down.
at::Tensor swiglu(const at::Tensor& x, const at::Tensor& gate_proj, const at::Tensor& up_proj,
                  const at::Tensor& down_proj);

// Routing sorted on the device (no host sync), a gather kernel, at::_grouped_mm with int32
// offsets (experts with no tokens are empty groups), the fused SwiGLU kernel, _grouped_mm, and
// a combine kernel that sums each token's k weighted rows.
at::Tensor moe_experts(const at::Tensor& x, const Routing& routing, const at::Tensor& gate_up,
                       const at::Tensor& down);

// Chunked head + loss: each chunk's logits stay in the activations' dtype, and one kernel per
// chunk turns them in place into d(loss)/d(logits) while computing the rows' losses, so no
// float32 [tokens, vocab] buffer ever exists.
at::Tensor cross_entropy(const at::Tensor& hidden, const at::Tensor& weight,
                         const at::Tensor& labels, int64_t ignore_index);

// nf4_linear: a tile of the weight's rows dequantised by one kernel into a reused buffer, then
// cuBLAS on the tile (the tiling of nf4_matmul.h); the same tiles in backward.
at::Tensor nf4_linear(const at::Tensor& x, const Nf4Weight& weight);

// Whether these kernels take activations of `dtype` (float32, bfloat16, float16) on CUDA.
bool supports(at::DeviceType device, at::ScalarType dtype);

}  // namespace titan::kernels::cuda
