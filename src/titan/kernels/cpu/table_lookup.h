// The two table look-ups of the AdamW8bit kernel: dequantising codes through their 256-value
// map, and quantising float32 values through the 65536-entry table of grid points
// (kernels/blockwise_8bit.h). Where the CPU has AVX-512:
//   - a map's 256 floats live in registers as four planes of 256 bytes (byte 0, 1, 2, 3 of
//     each float): a code picks its four bytes with byte permutes (AVX-512 VBMI), 64 codes at a
//     time, cheaper than a gather next to the arithmetic around it;
//   - the quantisation table is read by a 32-bit gather per 16 values, whose loads run beside
//     the arithmetic on other ports. (A branch-free binary search of the table's 255 steps in
//     registers, with 16-bit permutes, measured about as fast in the kernel; the gather is
//     simpler and needs no layout of its own.)
// Both give exactly the table's value; elsewhere AVX2 gathers or a plain loop.
#pragma once

#include <array>
#include <cstdint>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(__APPLE__)
#include <immintrin.h>
#define TITAN_QUANTIZE_AVX512 1
#endif

namespace titan::kernels::cpu::vec {

// A 256-value map with its byte planes.
struct FloatMap {
  explicit FloatMap(const float* values);
  const float* values;
  alignas(64) uint8_t planes[4][256];
};

// out[i] = map.values[codes[i]].
void look_up_floats(const uint8_t* codes, const FloatMap& map, float* out, int64_t n);

// The 65536-entry table padded for 32-bit gathers: a gather reads the four bytes from a grid
// point on and keeps the first, so the last point needs three bytes after it.
struct GridTable {
  explicit GridTable(const std::array<uint8_t, 65536>& table);
  alignas(64) uint8_t bytes[65536 + 64];
};

// One block's codes: out[i] = table[quantize_grid_point(x[i] * inverse)], bitsandbytes' own
// per-element loop; on AVX-512 quantize16, 16 values at a time.
void quantize(const float* x, float inverse, const GridTable& table, uint8_t* out, int64_t n);

#if defined(TITAN_QUANTIZE_AVX512)
// Whether quantize16 may run here (AVX-512 F, BW and VL).
bool quantize16_ok();

// Whether floats64 may run here (AVX-512 F, BW and VBMI).
bool floats64_ok();

// A map's byte planes in registers, for floats64: plane[b][q] holds byte b of codes
// 64q .. 64q + 63, and `order` the order of the codes that interleaving wants (floats64).
struct MapRegisters {
  __m512i plane[4][4];
  __m512i order;
};

__attribute__((target("avx512f,avx512bw"), always_inline)) inline MapRegisters load_map(
    const FloatMap& map) {
  // Interleaving bytes works within 128-bit lanes, so the codes are put in the order that makes
  // its output come out in sequence: position 16L + j takes code 16 (j / 4) + 4L + j % 4.
  alignas(64) static constexpr auto kOrder = [] {
    std::array<uint8_t, 64> order{};
    for (int p = 0; p < 64; ++p)
      order[p] = static_cast<uint8_t>(16 * (p % 16 / 4) + 4 * (p / 16) + p % 4);
    return order;
  }();
  MapRegisters r;
  for (int b = 0; b < 4; ++b)
    for (int q = 0; q < 4; ++q) r.plane[b][q] = _mm512_load_si512(map.planes[b] + 64 * q);
  r.order = _mm512_load_si512(kOrder.data());
  return r;
}

// The map values of 64 codes, in sequence in out[0..3]: each of the four planes is looked up
// with two 128-byte permutes (codes below 128, codes from 128) and a blend on the code's top
// bit; interleaving the planes' bytes gives the floats.
__attribute__((target("avx512f,avx512bw,avx512vbmi"), always_inline)) inline void floats64(
    const uint8_t* codes, const MapRegisters& map, __m512 out[4]) {
  const __m512i c = _mm512_permutexvar_epi8(map.order, _mm512_loadu_si512(codes));
  const __mmask64 high = _mm512_movepi8_mask(c);
  __m512i byte[4];
  for (int b = 0; b < 4; ++b)
    byte[b] =
        _mm512_mask_blend_epi8(high, _mm512_permutex2var_epi8(map.plane[b][0], c, map.plane[b][1]),
                               _mm512_permutex2var_epi8(map.plane[b][2], c, map.plane[b][3]));
  const __m512i low01 = _mm512_unpacklo_epi8(byte[0], byte[1]);
  const __m512i high01 = _mm512_unpackhi_epi8(byte[0], byte[1]);
  const __m512i low23 = _mm512_unpacklo_epi8(byte[2], byte[3]);
  const __m512i high23 = _mm512_unpackhi_epi8(byte[2], byte[3]);
  out[0] = _mm512_castsi512_ps(_mm512_unpacklo_epi16(low01, low23));
  out[1] = _mm512_castsi512_ps(_mm512_unpackhi_epi16(low01, low23));
  out[2] = _mm512_castsi512_ps(_mm512_unpacklo_epi16(high01, high23));
  out[3] = _mm512_castsi512_ps(_mm512_unpackhi_epi16(high01, high23));
}

// quantize()'s AVX-512 step: the codes of 16 values x * inverse, one a 32-bit lane.
// max(y, -1) gives -1 for a NaN (its second operand), whose grid point is 0, as a NaN's is in
// the scalar code; every point then lies in [0, 65535].
// gather16 is quantize16 before its last step: each lane holds its code in its low byte and
// the table's next three bytes above it (pack64 keeps the low bytes).
__attribute__((target("avx512f,avx512bw"), always_inline)) inline __m512i gather16(
    __m512 x, __m512 inverse, const GridTable& table) {
  const __m512 one = _mm512_set1_ps(1.0f), half = _mm512_set1_ps(0.5f);
  __m512 y = _mm512_mul_ps(x, inverse);
  y = _mm512_min_ps(_mm512_max_ps(y, _mm512_set1_ps(-1.0f)), one);
  const __m512 t = _mm512_mul_ps(_mm512_add_ps(y, one), half);
  const __m512i point = _mm512_cvttps_epi32(_mm512_fmadd_ps(t, _mm512_set1_ps(65535.0f), half));
  return _mm512_i32gather_epi32(point, table.bytes, 1);
}

__attribute__((target("avx512f,avx512bw"), always_inline)) inline __m512i quantize16(
    __m512 x, __m512 inverse, const GridTable& table) {
  return _mm512_and_si512(gather16(x, inverse, table), _mm512_set1_epi32(0xFF));
}

// The low bytes of the 64 lanes of a, b, c and d, in that order: two byte permutes of two
// vectors each and one insert, where converting each vector (vpmovdb) would take two
// operations on the same port, and the mask before them one more.
__attribute__((target("avx512f,avx512bw,avx512vbmi"), always_inline)) inline __m512i pack64(
    __m512i a, __m512i b, __m512i c, __m512i d) {
  alignas(64) static constexpr auto kLowBytes = [] {
    std::array<uint8_t, 64> index{};
    for (int p = 0; p < 64; ++p) index[p] = static_cast<uint8_t>(4 * (p % 32));
    return index;
  }();
  const __m512i low = _mm512_load_si512(kLowBytes.data());  // a's 16 then b's 16 (bit 6: b)
  const __m512i ab = _mm512_permutex2var_epi8(a, low, b), cd = _mm512_permutex2var_epi8(c, low, d);
  return _mm512_inserti64x4(ab, _mm512_castsi512_si256(cd), 1);
}
#endif

}  // namespace titan::kernels::cpu::vec
