#include "titan/kernels/cpu/table_lookup.h"

#include <cstring>

#include "titan/common/error.h"
#include "titan/kernels/blockwise_8bit.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// GCC 12 warns about the intrinsics' own undefined source operands (_mm512_undefined_*).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#define TITAN_X86_VECTORS 1
#endif

namespace titan::kernels::cpu::vec {

FloatMap::FloatMap(const float* v) : values(v) {
  for (int c = 0; c < 256; ++c) {
    uint32_t bits = 0;
    std::memcpy(&bits, values + c, 4);
    for (int b = 0; b < 4; ++b) planes[b][c] = static_cast<uint8_t>(bits >> (8 * b));
  }
}

GridTable::GridTable(const std::array<uint8_t, 65536>& t) : bytes{} {
  std::memcpy(bytes, t.data(), t.size());
}

namespace {

void floats_plain(const uint8_t* codes, const float* map, float* out, int64_t n, int64_t i) {
  for (; i < n; ++i) out[i] = map[codes[i]];
}

void quantize_plain(const float* x, float inverse, const uint8_t* table, uint8_t* out, int64_t n,
                    int64_t i) {
  for (; i < n; ++i) out[i] = table[quantize_grid_point(x[i] * inverse)];
}

#if defined(TITAN_X86_VECTORS)
// 64 codes: each of the four planes is looked up with two 128-byte permutes (codes below 128,
// codes from 128) and a blend on the code's top bit; interleaving the planes' bytes gives the
// floats. The interleave works within 128-bit lanes, so the codes are put in the order that
// makes its output come out in sequence: position 16L + j takes code 16 (j / 4) + 4L + j % 4.
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) void floats_vbmi(const uint8_t* codes,
                                                                        const FloatMap& map,
                                                                        float* out, int64_t n) {
  __m512i plane[4][4];
  for (int b = 0; b < 4; ++b)
    for (int q = 0; q < 4; ++q) plane[b][q] = _mm512_load_si512(map.planes[b] + 64 * q);
  alignas(64) static constexpr auto kOrder = [] {
    std::array<uint8_t, 64> order{};
    for (int p = 0; p < 64; ++p)
      order[p] = static_cast<uint8_t>(16 * (p % 16 / 4) + 4 * (p / 16) + p % 4);
    return order;
  }();
  const __m512i order = _mm512_load_si512(kOrder.data());
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    const __m512i c = _mm512_permutexvar_epi8(order, _mm512_loadu_si512(codes + i));
    const __mmask64 high = _mm512_movepi8_mask(c);
    __m512i byte[4];
    for (int b = 0; b < 4; ++b)
      byte[b] = _mm512_mask_blend_epi8(high, _mm512_permutex2var_epi8(plane[b][0], c, plane[b][1]),
                                       _mm512_permutex2var_epi8(plane[b][2], c, plane[b][3]));
    const __m512i low01 = _mm512_unpacklo_epi8(byte[0], byte[1]);
    const __m512i high01 = _mm512_unpackhi_epi8(byte[0], byte[1]);
    const __m512i low23 = _mm512_unpacklo_epi8(byte[2], byte[3]);
    const __m512i high23 = _mm512_unpackhi_epi8(byte[2], byte[3]);
    _mm512_storeu_si512(out + i, _mm512_unpacklo_epi16(low01, low23));
    _mm512_storeu_si512(out + i + 16, _mm512_unpackhi_epi16(low01, low23));
    _mm512_storeu_si512(out + i + 32, _mm512_unpacklo_epi16(high01, high23));
    _mm512_storeu_si512(out + i + 48, _mm512_unpackhi_epi16(high01, high23));
  }
  floats_plain(codes, map.values, out, n, i);
}

__attribute__((target("avx2"))) void floats_avx2(const uint8_t* codes, const float* map, float* out,
                                                 int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i idx =
        _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes + i)));
    _mm256_storeu_ps(out + i, _mm256_i32gather_ps(map, idx, 4));
  }
  floats_plain(codes, map, out, n, i);
}

__attribute__((target("avx512f,avx512bw"))) void quantize_avx512(const float* x, float inverse,
                                                                 const GridTable& table,
                                                                 uint8_t* out, int64_t n) {
  const __m512 scale = _mm512_set1_ps(inverse);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {  // two gathers in flight
    const __m512i a = quantize16(_mm512_loadu_ps(x + i), scale, table),
                  b = quantize16(_mm512_loadu_ps(x + i + 16), scale, table);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm512_cvtepi32_epi8(a));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i + 16), _mm512_cvtepi32_epi8(b));
  }
  for (; i + 16 <= n; i += 16)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm512_cvtepi32_epi8(quantize16(_mm512_loadu_ps(x + i), scale, table)));
  quantize_plain(x, inverse, table.bytes, out, n, i);
}

enum class Level { kPlain, kAvx2, kAvx512, kAvx512Vbmi };

Level level() {
  static const Level l = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw"))
      return __builtin_cpu_supports("avx512vbmi") ? Level::kAvx512Vbmi : Level::kAvx512;
    if (__builtin_cpu_supports("avx2")) return Level::kAvx2;
    return Level::kPlain;
  }();
  return l;
}
#endif

}  // namespace

void look_up_floats(const uint8_t* codes, const FloatMap& map, float* out, int64_t n) {
#if defined(TITAN_X86_VECTORS)
  switch (level()) {
    case Level::kAvx512Vbmi:
      return floats_vbmi(codes, map, out, n);
    case Level::kAvx512:
    case Level::kAvx2:
      return floats_avx2(codes, map.values, out, n);
    case Level::kPlain:
      break;
  }
#endif
  floats_plain(codes, map.values, out, n, 0);
}

void quantize(const float* x, float inverse, const GridTable& table, uint8_t* out, int64_t n) {
#if defined(TITAN_X86_VECTORS)
  if (level() == Level::kAvx512 || level() == Level::kAvx512Vbmi)
    return quantize_avx512(x, inverse, table, out, n);
#endif
  quantize_plain(x, inverse, table.bytes, out, n, 0);
}

#if defined(TITAN_QUANTIZE_AVX512)
bool quantize16_ok() {
  static const bool vl = __builtin_cpu_supports("avx512vl");
  return vl && (level() == Level::kAvx512 || level() == Level::kAvx512Vbmi);
}
#endif

}  // namespace titan::kernels::cpu::vec

#if defined(TITAN_X86_VECTORS)
#pragma GCC diagnostic pop
#endif
