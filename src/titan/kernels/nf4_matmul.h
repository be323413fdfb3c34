// The tiled NF4 matmul that the CPU and CUDA nf4_linear kernels share: the weight is
// dequantised a tile of rows at a time into one reused buffer, each tile multiplied as soon as
// it exists, so no more than one tile of the dequantised weight is ever alive. The backward
// (d input = d output @ W) walks the same tiles. Only the dequantisation of a tile differs
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

// y [N, rows] = x [N, cols] @ W^T, tile by tile.
inline at::Tensor tiled_forward(const at::Tensor& x, const Nf4Weight& w, DequantizeRowsFn rows_fn) {
  const int64_t tile = nf4_tile_rows(w);
  at::Tensor buffer = at::empty({tile, w.cols}, x.options());
  if (tile == w.rows) {  // one tile: the whole product at once
    rows_fn(w, 0, buffer);
    return at::mm(x, buffer.t());
  }
  at::Tensor out = at::empty({x.size(0), w.rows}, x.options());
  for (int64_t r = 0; r < w.rows; r += tile) {
    const int64_t n = std::min(tile, w.rows - r);
    at::Tensor part = n == tile ? buffer : buffer.narrow(0, 0, n);
    rows_fn(w, r, part);
    out.narrow(1, r, n).copy_(at::mm(x, part.t()));
  }
  return out;
}

// dx [N, cols] = dy [N, rows] @ W, accumulated tile by tile.
inline at::Tensor tiled_backward(const at::Tensor& dy, const Nf4Weight& w,
                                 DequantizeRowsFn rows_fn) {
  const int64_t tile = nf4_tile_rows(w);
  at::Tensor dx = at::zeros({dy.size(0), w.cols}, dy.options());
  at::Tensor buffer = at::empty({tile, w.cols}, dy.options());
  for (int64_t r = 0; r < w.rows; r += tile) {
    const int64_t n = std::min(tile, w.rows - r);
    at::Tensor part = n == tile ? buffer : buffer.narrow(0, 0, n);
    rows_fn(w, r, part);
    dx.addmm_(dy.narrow(1, r, n), part);
  }
  return dx;
}

template <DequantizeRowsFn kRows>
struct TiledNf4Linear : public torch::autograd::Function<TiledNf4Linear<kRows>> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            const at::Tensor& packed, const at::Tensor& absmax, int64_t rows,
                            int64_t cols, int64_t blocksize) {
    const Nf4Weight w{packed, absmax, rows, cols, blocksize};
    save_nf4_weight(ctx, w);
    const at::Tensor flat = x.reshape({-1, cols}).contiguous();
    std::vector<int64_t> shape = x.sizes().vec();
    shape.back() = rows;
    return tiled_forward(flat, w, kRows).view(shape);
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
    out[0] = tiled_backward(flat, w, kRows).view(shape);
    return out;
  }
};

}  // namespace detail

// nf4_linear through `kRows`: an autograd function whose backward dequantises again.
template <DequantizeRowsFn kRows>
at::Tensor tiled_nf4_linear(const at::Tensor& x, const Nf4Weight& w) {
  TORCH_CHECK(x.size(-1) == w.cols, "nf4_linear: input [..., ", x.size(-1), "] against a weight [",
              w.rows, ", ", w.cols, "]");
  return detail::TiledNf4Linear<kRows>::apply(x, w.packed, w.absmax, w.rows, w.cols, w.blocksize);
}

}  // namespace titan::kernels
