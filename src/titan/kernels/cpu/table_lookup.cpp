#include "titan/kernels/cpu/table_lookup.h"

#include <cstring>

#include "titan/common/error.h"

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

StepTable::StepTable(const std::array<uint8_t, 65536>& t) : table(t.data()), level{} {
  TITAN_CHECK(t.back() == 255, "StepTable: the table must end at code 255, got ", int{t.back()});
  std::array<uint16_t, 256> first{};  // first[c]: the least point whose code is at least c
  size_t k = 0;
  for (int c = 1; c < 256; ++c) {
    while (t[k] < c) ++k;  // ends: t[65535] is 255
    first[c] = static_cast<uint16_t>(k);
  }
  for (int l = 0; l < 8; ++l)
    for (int j = 0; j < (1 << l); ++j) level[l][j] = first[(2 * j + 1) << (7 - l)];
}

namespace {

void floats_plain(const uint8_t* codes, const float* map, float* out, int64_t n, int64_t i) {
  for (; i < n; ++i) out[i] = map[codes[i]];
}

void steps_plain(const uint16_t* point, const uint8_t* table, uint8_t* out, int64_t n, int64_t i) {
  for (; i < n; ++i) out[i] = table[point[i]];
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

// The pivots of the eight levels of the binary search (table_lookup.h) in registers: levels
// 0-5 have at most 32 (one register, vpermw), level 6 has 64 (two, vpermi2w), level 7 has 128
// (four: two permutes and a blend on j's bit 6).
struct Pivots {
  __m512i first, small[5], l6[2], l7[4];
};

__attribute__((target("avx512f,avx512bw"), always_inline)) inline __m512i search(const Pivots& p,
                                                                                 __m512i k) {
  const __m512i one = _mm512_set1_epi16(1);
  __m512i j = _mm512_maskz_mov_epi16(_mm512_cmple_epu16_mask(p.first, k), one);
  for (int l = 1; l < 8; ++l) {  // unrolled by the compiler: l is known in each copy
    __m512i pivot;
    if (l < 6)
      pivot = _mm512_permutexvar_epi16(j, p.small[l - 1]);
    else if (l == 6)
      pivot = _mm512_permutex2var_epi16(p.l6[0], j, p.l6[1]);
    else
      pivot = _mm512_mask_blend_epi16(_mm512_test_epi16_mask(j, _mm512_set1_epi16(64)),
                                      _mm512_permutex2var_epi16(p.l7[0], j, p.l7[1]),
                                      _mm512_permutex2var_epi16(p.l7[2], j, p.l7[3]));
    const __mmask32 at_or_above = _mm512_cmple_epu16_mask(pivot, k);
    j = _mm512_add_epi16(j, j);
    j = _mm512_mask_add_epi16(j, at_or_above, j, one);
  }
  return j;
}

// 64 points an iteration, two independent searches: each is a chain of eight dependent levels,
// and two chains keep the permute unit busy where one would wait on it.
__attribute__((target("avx512f,avx512bw"))) void steps_avx512(const uint16_t* point,
                                                              const StepTable& t, uint8_t* out,
                                                              int64_t n) {
  Pivots p;
  p.first = _mm512_set1_epi16(static_cast<int16_t>(t.level[0][0]));
  for (int l = 1; l < 6; ++l) p.small[l - 1] = _mm512_load_si512(t.level[l]);
  for (int r = 0; r < 2; ++r) p.l6[r] = _mm512_load_si512(t.level[6] + 32 * r);
  for (int r = 0; r < 4; ++r) p.l7[r] = _mm512_load_si512(t.level[7] + 32 * r);
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    const __m512i a = search(p, _mm512_loadu_si512(point + i));
    const __m512i b = search(p, _mm512_loadu_si512(point + i + 32));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm512_cvtepi16_epi8(a));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i + 32), _mm512_cvtepi16_epi8(b));
  }
  for (; i + 32 <= n; i += 32) {
    const __m512i a = search(p, _mm512_loadu_si512(point + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm512_cvtepi16_epi8(a));
  }
  steps_plain(point, t.table, out, n, i);
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

void look_up_steps(const uint16_t* point, const StepTable& table, uint8_t* out, int64_t n) {
#if defined(TITAN_X86_VECTORS)
  if (level() == Level::kAvx512 || level() == Level::kAvx512Vbmi)
    return steps_avx512(point, table, out, n);
#endif
  steps_plain(point, table.table, out, n, 0);
}

}  // namespace titan::kernels::cpu::vec

#if defined(TITAN_X86_VECTORS)
#pragma GCC diagnostic pop
#endif
