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

#if defined(TITAN_QUANTIZE_AVX512)
// 64 codes at a time (floats64), the rest one by one.
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) void floats_vbmi(const uint8_t* codes,
                                                                        const FloatMap& map,
                                                                        float* out, int64_t n) {
  const MapRegisters regs = load_map(map);
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    __m512 values[4];
    floats64(codes + i, regs, values);
    for (int q = 0; q < 4; ++q) _mm512_storeu_ps(out + i + 16 * q, values[q]);
  }
  floats_plain(codes, map.values, out, n, i);
}
#endif

#if defined(TITAN_X86_VECTORS)
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
#if defined(TITAN_QUANTIZE_AVX512)
      return floats_vbmi(codes, map, out, n);
#endif
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
bool floats64_ok() { return level() == Level::kAvx512Vbmi; }

bool quantize16_ok() {
  static const bool vl = __builtin_cpu_supports("avx512vl");
  return vl && (level() == Level::kAvx512 || level() == Level::kAvx512Vbmi);
}
#endif

}  // namespace titan::kernels::cpu::vec

#if defined(TITAN_X86_VECTORS)
#pragma GCC diagnostic pop
#endif
