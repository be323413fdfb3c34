// The tiled NF4 matmul that the CPU and CUDA nf4_linear kernels share: the weight is
// dequantised a tile of rows at a time into one reused buffer (tile_buffer), each tile multiplied
// as soon as it exists, so no more than one tile of the dequantised weight is ever alive. The
// backward (d input = d output @ W) walks the same tiles. Only the dequantisation of a tile differs
// between devices.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <functional>

#include "titan/kernels/ops.h"

namespace titan::kernels {

// Writes rows [begin, begin + out.size(0)) of the dequantised weight into `out` (contiguous
// [n, cols], the activations' dtype and device).
using DequantizeRowsFn = void (*)(const Nf4Weight& weight, int64_t begin, at::Tensor& out);
// out = a @ b, or out += a @ b with `accumulate` (the device's GEMM: on the CPU
// cpu/gemm.h's, which runs float32 on oneDNN).
using GemmOutFn = void (*)(const at::Tensor& a, const at::Tensor& b, const at::Tensor& out,
                           bool accumulate);

// ATen's GEMM (at::mm_out / addmm_), for devices with nothing faster.
inline void aten_gemm_out(const at::Tensor& a, const at::Tensor& b, const at::Tensor& out,
                          bool accumulate) {
  if (accumulate)
    const_cast<at::Tensor&>(out).addmm_(a, b);
  else
    at::mm_out(const_cast<at::Tensor&>(out), a, b);
}

// Elements of a tile: 4 Mi (16 MiB in float32). Small weights are one tile, so one GEMM.
inline constexpr int64_t kNf4TileElements = int64_t{1} << 22;

inline int64_t nf4_tile_rows(const Nf4Weight& w) {
  return std::max<int64_t>(
      1, std::min<int64_t>(w.rows, kNf4TileElements / std::max<int64_t>(w.cols, 1)));
}

// An NF4 weight kept in an autograd context for the backward (its tensors, not a dequantised
// copy), and read back; shared by every nf4_linear implementation.
inline void save_nf4_weight(torch::autograd::AutogradContext* ctx, const Nf4Weight& w) {
  ctx->saved_data["packed"] = w.packed;
  ctx->saved_data["absmax"] = w.absmax;
  ctx->saved_data["rows"] = w.rows;
  ctx->saved_data["cols"] = w.cols;
  ctx->saved_data["blocksize"] = w.blocksize;
}

inline Nf4Weight saved_nf4_weight(const torch::autograd::AutogradContext* ctx) {
  const auto& d = ctx->saved_data;
  return Nf4Weight{d.at("packed").toTensor(), d.at("absmax").toTensor(), d.at("rows").toInt(),
                   d.at("cols").toInt(), d.at("blocksize").toInt()};
}

namespace detail {

// The buffer a tile is dequantised into: on the CPU one per calling thread, kept from call to
// call and grown to the largest tile seen (at most kNf4TileElements elements, 16 MiB in
// float32); elsewhere (the CUDA caching allocator reuses blocks already) a fresh tensor. Made and
// freed once per projection, the CPU buffer made the heap grow during a step: once the trainer
// has glibc keep freed blocks (common/heap_reuse.h), a freed tile was, depending on the threads'
// timing, not reused by the next one, and each later tile extended the heap (the QLoRA start-up
// test peaked 0.35 GB higher in about half of its runs at two threads; docs/kernels.md).
inline at::Tensor tile_buffer(int64_t rows, int64_t cols, const at::TensorOptions& options) {
  if (!options.device().is_cpu()) return at::empty({rows, cols}, options);
  thread_local at::Tensor bytes;
  const int64_t needed =
      rows * cols *
      static_cast<int64_t>(c10::elementSize(c10::typeMetaToScalarType(options.dtype())));
  if (!bytes.defined() || bytes.numel() < needed) {
    bytes = at::Tensor();  // the old buffer goes before the new one is allocated
    bytes = at::empty({needed}, at::TensorOptions(at::kByte));
  }
  return bytes.narrow(0, 0, needed)
      .view(c10::typeMetaToScalarType(options.dtype()))
      .view({rows, cols});
}

// y [N, rows] = x [N, cols] @ W^T, tile by tile: each tile's product goes straight into its
// columns of y.
inline at::Tensor tiled_forward(const at::Tensor& x, const Nf4Weight& w, DequantizeRowsFn rows_fn,
                                GemmOutFn gemm) {
  const int64_t tile = nf4_tile_rows(w);
  at::Tensor buffer = tile_buffer(tile, w.cols, x.options());
  at::Tensor out = at::empty({x.size(0), w.rows}, x.options());
  for (int64_t r = 0; r < w.rows; r += tile) {
    const int64_t n = std::min(tile, w.rows - r);
    at::Tensor part = n == tile ? buffer : buffer.narrow(0, 0, n);
    rows_fn(w, r, part);
    gemm(x, part.t(), n == w.rows ? out : out.narrow(1, r, n), /*accumulate=*/false);
  }
  return out;
}

// dx [N, cols] = dy [N, rows] @ W, accumulated tile by tile (the first tile writes).
inline at::Tensor tiled_backward(const at::Tensor& dy, const Nf4Weight& w, DequantizeRowsFn rows_fn,
                                 GemmOutFn gemm) {
  const int64_t tile = nf4_tile_rows(w);
  at::Tensor dx = at::empty({dy.size(0), w.cols}, dy.options());
  at::Tensor buffer = tile_buffer(tile, w.cols, dy.options());
  for (int64_t r = 0; r < w.rows; r += tile) {
    const int64_t n = std::min(tile, w.rows - r);
    at::Tensor part = n == tile ? buffer : buffer.narrow(0, 0, n);
    rows_fn(w, r, part);
    gemm(dy.narrow(1, r, n), part, dx, /*accumulate=*/r > 0);
  }
  return dx;
}

template <DequantizeRowsFn kRows, GemmOutFn kGemm>
struct TiledNf4Linear : public torch::autograd::Function<TiledNf4Linear<kRows, kGemm>> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            const at::Tensor& packed, const at::Tensor& absmax, int64_t rows,
                            int64_t cols, int64_t blocksize) {
    const Nf4Weight w{packed, absmax, rows, cols, blocksize};
    save_nf4_weight(ctx, w);
    const at::Tensor flat = x.reshape({-1, cols}).contiguous();
    std::vector<int64_t> shape = x.sizes().vec();
    shape.back() = rows;
    return tiled_forward(flat, w, kRows, kGemm).view(shape);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const Nf4Weight w = saved_nf4_weight(ctx);
    const at::Tensor& dy = grads[0];
    torch::autograd::variable_list out(6);
    if (!dy.defined()) return out;
    const at::Tensor flat = dy.reshape({-1, w.rows}).contiguous();
    std::vector<int64_t> shape = dy.sizes().vec();
    shape.back() = w.cols;
    out[0] = tiled_backward(flat, w, kRows, kGemm).view(shape);
    return out;
  }
};

}  // namespace detail

// nf4_linear through `kRows` and `kGemm`: an autograd function whose backward dequantises
// again.
template <DequantizeRowsFn kRows, GemmOutFn kGemm = &aten_gemm_out>
at::Tensor tiled_nf4_linear(const at::Tensor& x, const Nf4Weight& w) {
  TORCH_CHECK(x.size(-1) == w.cols, "nf4_linear: input [..., ", x.size(-1), "] against a weight [",
              w.rows, ", ", w.cols, "]");
  return detail::TiledNf4Linear<kRows, kGemm>::apply(x, w.packed, w.absmax, w.rows, w.cols,
                                                     w.blocksize);
}

}  // namespace titan::kernels
