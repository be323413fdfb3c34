// Hand-written CPU kernels (implementation "fused" of their ops on the CPU). Each is an autograd
// function with its own backward; loops run on ATen's intra-op thread pool (OpenMP in the torch
// wheel) over float32 rows whose inner loops are vectorised per CPU level (vector_math.h). Every
// result is independent of the number of threads. Checked against `reference` in
// tests/unit/kernels/fused_kernels_test.cpp. See docs/kernels.md.
#pragma once

#include "titan/kernels/ops.h"

namespace titan::kernels::cpu {

// The rms_norm op: one pass per row for the statistics and the output, one for the backward.
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);

// The moe_experts op: a counting sort of the (token, slot) pairs by expert, per expert the
// gate/up GEMM with SwiGLU fused into its epilogue and the down GEMM, then the weighted combine
// per token; the backward runs the same structure in reverse.
at::Tensor moe_experts(const at::Tensor& x, const Routing& routing, const at::Tensor& gate_up,
                       const at::Tensor& down);

// The cross_entropy op: per chunk of rows the logits GEMM into a buffer reused across calls,
// per row a pass for its maximum, one writing exp(logit - max) in place and summing it (the loss)
// and one scaling that into the logits' gradient, then the two gradient GEMMs (cross_entropy.cpp).
at::Tensor cross_entropy(const at::Tensor& hidden, const at::Tensor& weight,
                         const at::Tensor& labels, int64_t ignore_index);
// The same with `chunk_rows` rows per chunk (0: automatic, at most 2^27 logits per chunk).
at::Tensor cross_entropy_chunked(const at::Tensor& hidden, const at::Tensor& weight,
                                 const at::Tensor& labels, int64_t ignore_index,
                                 int64_t chunk_rows);

// The nf4_linear op: the weight dequantised a tile of rows at a time (at most
// kNf4TileElements, nf4_matmul.h), each tile's GEMM run as soon as it exists; the same tiles in
// backward.
at::Tensor nf4_linear(const at::Tensor& x, const Nf4Weight& weight);

// Whether these kernels take activations of `dtype` (float32 or bfloat16) on the CPU.
bool supports(at::DeviceType device, at::ScalarType dtype);

}  // namespace titan::kernels::cpu
