// The two table look-ups of the AdamW8bit kernel over contiguous arrays: dequantising codes
// through their 256-value map, and quantising 16-bit grid points through the 65536-entry table
// (kernels/blockwise_8bit.h). Gathers are slow next to the arithmetic around them, so where the
// CPU has AVX-512 the tables live in registers instead:
//   - a map's 256 floats as four planes of 256 bytes (byte 0, 1, 2, 3 of each float): a code
//     picks its four bytes with byte permutes (AVX-512 VBMI), 64 codes at a time;
//   - the quantisation table, a non-decreasing step function of the point, as the 255 points
//     where it steps: the code of a point is the number of steps at or below it, found by a
//     binary search of eight compares on 32 points at a time, each step point picked with a
//     16-bit permute (AVX-512 BW).
// Both give exactly the table's value; elsewhere AVX2 gathers or a plain loop.
#pragma once

#include <array>
#include <cstdint>

namespace titan::kernels::cpu::vec {

// A 256-value map with its byte planes.
struct FloatMap {
  explicit FloatMap(const float* values);
  const float* values;
  alignas(64) uint8_t planes[4][256];
};

// out[i] = map.values[codes[i]].
void look_up_floats(const uint8_t* codes, const FloatMap& map, float* out, int64_t n);

// A non-decreasing table of 65536 bytes whose last entry is 255, with its step points laid out
// for the binary search: after l levels j holds the code's top l bits, and level[l][j] is the
// first point whose code is at least (2j + 1) << (7 - l), the pivot that decides the next bit.
struct StepTable {
  explicit StepTable(const std::array<uint8_t, 65536>& table);
  const uint8_t* table;
  alignas(64) uint16_t level[8][128];
};

// out[i] = table.table[point[i]].
void look_up_steps(const uint16_t* point, const StepTable& table, uint8_t* out, int64_t n);

}  // namespace titan::kernels::cpu::vec
