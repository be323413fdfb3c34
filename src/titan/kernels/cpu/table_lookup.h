// Table look-ups by index over contiguous arrays, with the CPU's gather instructions where it
// has them (AVX-512 or AVX2, chosen at run time; the compiler does not vectorise these loops
// itself), else a plain loop. Used by the AdamW8bit kernel to dequantise codes through their
// 256-value map and to quantise through the 65536-entry table (kernels/blockwise_8bit.h).
#pragma once

#include <cstdint>

namespace titan::kernels::cpu::vec {

// out[i] = map[codes[i]]; map has 256 entries.
void look_up_floats(const uint8_t* codes, const float* map, float* out, int64_t n);

// out[i] = table[index[i]]. The gathers read 4 bytes at table + index[i]: the table must be
// readable 3 bytes past its largest index (kTablePadding).
inline constexpr int64_t kTablePadding = 4;
void look_up_bytes(const uint32_t* index, const uint8_t* table, uint8_t* out, int64_t n);

}  // namespace titan::kernels::cpu::vec
