// The NF4 matmul on Intel AMX (bfloat16 tiles, float32 accumulation): the weight is dequantised
// a strip at a time straight into the layout the tile loads read, in a buffer that stays in the
// core's L2 cache, and multiplied there, so the dequantised weight never goes to memory and no
// GEMM library repacks it. The forward computes y^T = W x^T (the weight's rows are the tiles'
// rows as they come out of the dequantisation; the activations are packed once per call), the
// backward dx = dy W (pairs of the weight's rows interleaved, AMX's VNNI layout). Each output is
// the float32 sum of its products rounded once to bfloat16, like oneDNN's bfloat16 GEMM, in a
// fixed order: the same bits at any thread count. See docs/kernels.md.
#pragma once

#include <ATen/ATen.h>

#include "titan/kernels/ops.h"

namespace titan::kernels::cpu {

// Whether this CPU has AMX-BF16 (and AVX-512) and the kernel lets the process use the tile
// registers (asked for once).
bool nf4_amx_available();

// Whether the AMX kernels take this weight with activations of `dtype`: bfloat16, blocks of 64
// elements, rows and columns multiples of 64, on an AMX CPU.
bool nf4_amx_supports(const Nf4Weight& w, at::ScalarType dtype);

// y [M, rows] = x [M, cols] @ W^T, for a contiguous bfloat16 x. The sum over the columns runs in
// chunks of at most `chunk_columns` (0: as many as keep M x chunk activations in L2; tests set
// it to cover several chunks).
at::Tensor nf4_amx_forward(const at::Tensor& x, const Nf4Weight& w, int64_t chunk_columns = 0);

// dx [M, cols] = dy [M, rows] @ W, for a contiguous bfloat16 dy.
at::Tensor nf4_amx_backward(const at::Tensor& dy, const Nf4Weight& w);

}  // namespace titan::kernels::cpu
