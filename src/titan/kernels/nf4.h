// NF4, the 4-bit NormalFloat format of QLoRA's frozen base weights, bit for bit as bitsandbytes
// defines it (docs/lora.md):
//
//   quantize_4bit(w, blocksize=64, quant_type="nf4"): the row-major weight is cut into blocks of
//   64 elements (the last may be shorter); each block's absmax is its largest |element|; each
//   element, scaled by 1/absmax (divided by it in a last, short block) and clamped to [-1, 1],
//   becomes the index of the nearest of the 16 NF4 code values (a value exactly between two
//   goes to the lower one); two indices a byte, the earlier element in the high nibble.
//   dequantize_4bit: code[index] * absmax, in float32, then rounded to the wanted dtype.
//
//   Double quantisation (compress_statistics=True): the float32 absmax values, less their mean
//   (the offset), are quantised again in blocks of 256 to 8-bit indices into bitsandbytes'
//   signed "dynamic" map (nearest value, ties to the lower index), each block with its own
//   float32 absmax; the scales then take about 8.1 bits per 64 weights instead of 32.
//
// These are the format; nf4_linear (ops.h) is the matmul that reads it.
#pragma once

#include <ATen/ATen.h>

#include <array>
#include <cstdint>

#include "titan/kernels/dynamic_map.h"
#include "titan/kernels/ops.h"

namespace titan::kernels {

inline constexpr int64_t kNf4BlockSize = 64;
inline constexpr int64_t kScaleBlockSize = 256;  // double quantisation's blocks

// The 16 NF4 values, ascending (bitsandbytes' table; the QLoRA paper, appendix E).
const std::array<float, 16>& nf4_code();

// Quantises a 2-D floating weight (read as float32) into NF4. A 1-D weight is one row.
Nf4Weight quantize_nf4(const at::Tensor& weight, int64_t blocksize = kNf4BlockSize);

// The whole weight dequantised, [rows, cols] in `dtype` (for exports and references).
at::Tensor dequantize_nf4(const Nf4Weight& weight, at::ScalarType dtype = at::kFloat);

// Rows [begin, begin + out.size(0)) of the dequantised weight, written into `out`
// ([n, cols], contiguous, float32 or bfloat16 or float16, on the CPU).
void dequantize_nf4_rows_cpu(const Nf4Weight& weight, int64_t begin, at::Tensor& out);

// Double quantisation of NF4's scales.
struct QuantizedScales {
  at::Tensor codes;   // uint8 [n]: indices into dynamic_map()
  at::Tensor absmax;  // float32 [ceil(n / 256)]
  at::Tensor offset;  // float32 scalar: the mean of the scales, subtracted before quantising
  int64_t count() const { return codes.numel(); }
};
QuantizedScales quantize_scales(const at::Tensor& absmax);
at::Tensor dequantize_scales(const QuantizedScales& scales);  // float32 [n]

// Bytes the quantised weight takes (packed codes and scales).
int64_t nf4_bytes(const Nf4Weight& weight);

}  // namespace titan::kernels
