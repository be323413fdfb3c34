#include "titan/kernels/blockwise_8bit.h"

#include <algorithm>

#include "titan/common/error.h"
#include "titan/kernels/dynamic_map.h"

namespace titan::kernels {
namespace {

std::array<uint8_t, 65536> build_table(bool is_signed) {
  const float* code = dynamic_map(is_signed).const_data_ptr<float>();
  std::array<float, 255> mid{};
  for (size_t j = 0; j < mid.size(); ++j) mid[j] = 0.5f * (code[j] + code[j + 1]);
  std::array<uint8_t, 65536> table{};
  size_t below = 0;  // the grid rises, so the count of midpoints below it only grows
  for (size_t k = 0; k < table.size(); ++k) {
    const float point = (static_cast<float>(k) + static_cast<float>(k)) / 65535.0f - 1.0f;
    while (below < mid.size() && mid[below] < point) ++below;
    table[k] = static_cast<uint8_t>(below);
  }
  return table;
}

// The table as a tensor on `device`, for the ATen reference.
at::Tensor table_tensor(bool is_signed, at::Device device) {
  const auto& table = quantize_table(is_signed);
  return at::from_blob(const_cast<uint8_t*>(table.data()), {65536}, at::kByte)
      .to(device, at::kLong);
}

}  // namespace

const std::array<uint8_t, 65536>& quantize_table(bool is_signed) {
  static const std::array<uint8_t, 65536> signed_table = build_table(true);
  static const std::array<uint8_t, 65536> unsigned_table = build_table(false);
  return is_signed ? signed_table : unsigned_table;
}

namespace {

// On the CPU: bitsandbytes' own loop (its quantize_cpu_impl), block by block.
BlockwiseQuantized quantize_cpu(const at::Tensor& flat, const at::IntArrayRef shape,
                                bool is_signed) {
  const int64_t n = flat.numel();
  const int64_t blocks = quant_blocks(n);
  BlockwiseQuantized out{at::empty({n}, at::kByte), at::empty({blocks}, at::kFloat)};
  const float* x = flat.const_data_ptr<float>();
  uint8_t* codes = out.codes.mutable_data_ptr<uint8_t>();
  float* absmax = out.absmax.mutable_data_ptr<float>();
  const uint8_t* table = quantize_table(is_signed).data();
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t first = b * kQuantBlock, count = std::min(kQuantBlock, n - first);
    float top = 0.0f;
    for (int64_t i = 0; i < count; ++i) top = std::max(top, std::fabs(x[first + i]));
    absmax[b] = top;
    if (top == 0.0f) {
      std::fill(codes + first, codes + first + count, uint8_t{0});
      continue;
    }
    const float inverse = 1.0f / top;
    for (int64_t i = 0; i < count; ++i)
      codes[first + i] = table[quantize_grid_point(x[first + i] * inverse)];
  }
  out.codes = out.codes.view(shape);
  return out;
}

}  // namespace

BlockwiseQuantized quantize_blockwise(const at::Tensor& x, bool is_signed) {
  const at::Tensor flat = x.detach().to(at::kFloat).contiguous().reshape({-1});
  if (flat.is_cpu()) return quantize_cpu(flat, x.sizes(), is_signed);
  // Elsewhere the same in ATen ops.
  const int64_t n = flat.numel();
  const int64_t blocks = quant_blocks(n);
  BlockwiseQuantized out;
  // Blocks as rows of a zero-padded [blocks, 256] matrix: padding does not change max(0, |x|).
  const at::Tensor rows =
      at::constant_pad_nd(flat.abs(), {0, blocks * kQuantBlock - n}).view({blocks, kQuantBlock});
  out.absmax = std::get<0>(rows.max(1)).clamp_min(0.0);
  const at::Tensor inverse = out.absmax.reciprocal();  // float32 1 / absmax, once per block
  const at::Tensor y =
      (flat * inverse.repeat_interleave(kQuantBlock).slice(0, 0, n)).clamp(-1.0, 1.0);
  // fmaf((y + 1) * 0.5, 65535, 0.5): the product is exact in float64 (24 + 16 bits), so adding
  // 0.5 there and rounding once to float32 is the fused multiply-add.
  const at::Tensor scaled = ((y + 1.0) * 0.5).to(at::kDouble).mul(65535.0).add(0.5).to(at::kFloat);
  at::Tensor point = scaled.trunc().to(at::kLong);
  point = at::where(point.isnan().logical_or(point < 0), at::zeros_like(point), point) & 0xFFFF;
  at::Tensor codes = table_tensor(is_signed, flat.device()).index_select(0, point);
  const at::Tensor zero_block = (out.absmax == 0).repeat_interleave(kQuantBlock).slice(0, 0, n);
  codes = at::where(zero_block, at::zeros_like(codes), codes);
  out.codes = codes.to(at::kByte).view(x.sizes());
  return out;
}

at::Tensor dequantize_blockwise(const at::Tensor& codes, const at::Tensor& absmax, bool is_signed) {
  const int64_t n = codes.numel();
  TITAN_CHECK(absmax.numel() == quant_blocks(n), "dequantize_blockwise: ", n, " codes need ",
              quant_blocks(n), " absmax values, got ", absmax.numel());
  const at::Tensor map = dynamic_map(is_signed).to(codes.device());
  const at::Tensor values = map.index_select(0, codes.reshape({-1}).to(at::kLong));
  const at::Tensor scales =
      absmax.reshape({-1}).to(at::kFloat).repeat_interleave(kQuantBlock).slice(0, 0, n);
  return (values * scales).view(codes.sizes());
}

}  // namespace titan::kernels
