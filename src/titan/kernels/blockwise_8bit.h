// Block-wise 8-bit quantisation of optimizer states, bit for bit as bitsandbytes' CPU library
// does it (its quantize_blockwise / dequantize_blockwise, docs/optimizers.md):
//
//   A tensor, flattened row-major, is cut into blocks of 256 consecutive elements (the last may
//   be shorter). Each block keeps its absmax, max(0, max |x|), as float32, and each element one
//   byte: an index into a 256-value map (dynamic_map.h). The index is not the nearest map value
//   but a table look-up: y = clamp(x * (1 / absmax), -1, 1) is snapped to a grid of 65536
//   points, k = (int) fmaf((y + 1) * 0.5, 65535, 0.5), and quantize_table()[k] is the index
//   whose bucket holds grid point k. A block of zeros is all index 0.
//   Dequantisation: map[index] * absmax of the block, one float32 multiply.
//
// These are the reference implementations (bitsandbytes' loop on the CPU, ATen ops on other
// devices); the fused optimizer kernels (adamw8bit.h) do the same per element inside their one
// pass.
#pragma once

#include <ATen/ATen.h>

#include <array>
#include <cmath>
#include <cstdint>

namespace titan::kernels {

inline constexpr int64_t kQuantBlock = 256;

inline int64_t quant_blocks(int64_t numel) { return (numel + kQuantBlock - 1) / kQuantBlock; }

struct BlockwiseQuantized {
  at::Tensor codes;   // uint8, shaped like the tensor
  at::Tensor absmax;  // float32 [quant_blocks(numel)]
};

// For each of the 65536 grid points k, the map index it quantises to: how many midpoints
// between neighbouring map values lie strictly below (2k / 65535 - 1), in float32 (a grid point
// on a midpoint takes the lower index).
const std::array<uint8_t, 65536>& quantize_table(bool is_signed);

// The grid point of y = x / absmax (y is clamped to [-1, 1]; NaN gives point 0).
inline uint32_t quantize_grid_point(float y) {
  y = y < -1.0f ? -1.0f : (1.0f < y ? 1.0f : y);
  // (int) of a float truncates, as bitsandbytes' cvttss2si does; only the low 16 bits are used.
  return static_cast<uint32_t>(static_cast<int32_t>(std::fmaf((y + 1.0f) * 0.5f, 65535.0f, 0.5f))) &
         0xFFFFu;
}

// x (any floating dtype, read as float32) -> codes and absmax.
BlockwiseQuantized quantize_blockwise(const at::Tensor& x, bool is_signed);
// The float32 tensor, shaped like `codes`.
at::Tensor dequantize_blockwise(const at::Tensor& codes, const at::Tensor& absmax, bool is_signed);

}  // namespace titan::kernels
