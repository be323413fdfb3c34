#include "titan/kernels/cpu/table_lookup.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// GCC 12 warns about the intrinsics' own undefined source operands (_mm512_undefined_*).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#define TITAN_X86_GATHERS 1
#endif

namespace titan::kernels::cpu::vec {
namespace {

void floats_plain(const uint8_t* codes, const float* map, float* out, int64_t n, int64_t i) {
  for (; i < n; ++i) out[i] = map[codes[i]];
}

void bytes_plain(const uint32_t* index, const uint8_t* table, uint8_t* out, int64_t n, int64_t i) {
  for (; i < n; ++i) out[i] = table[index[i]];
}

#if defined(TITAN_X86_GATHERS)
__attribute__((target("avx512f"))) void floats_avx512(const uint8_t* codes, const float* map,
                                                      float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i idx =
        _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + i)));
    _mm512_storeu_ps(out + i, _mm512_i32gather_ps(idx, map, 4));
  }
  floats_plain(codes, map, out, n, i);
}

__attribute__((target("avx512f"))) void bytes_avx512(const uint32_t* index, const uint8_t* table,
                                                     uint8_t* out, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i idx = _mm512_loadu_si512(index + i);
    const __m512i words = _mm512_i32gather_epi32(idx, table, 1);
    // vpmovdb keeps each word's low byte: the table entry.
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm512_cvtepi32_epi8(words));
  }
  bytes_plain(index, table, out, n, i);
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

__attribute__((target("avx2"))) void bytes_avx2(const uint32_t* index, const uint8_t* table,
                                                uint8_t* out, int64_t n) {
  const __m256i low_bytes =
      _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 4, 8, 12, -1,
                       -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i idx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(index + i));
    const __m256i words = _mm256_i32gather_epi32(reinterpret_cast<const int*>(table), idx, 1);
    // The low byte of each word, four per 128-bit lane, then the two lanes' four bytes.
    const __m256i packed = _mm256_shuffle_epi8(words, low_bytes);
    const uint32_t lo = static_cast<uint32_t>(_mm256_extract_epi32(packed, 0));
    const uint32_t hi = static_cast<uint32_t>(_mm256_extract_epi32(packed, 4));
    const uint64_t both = static_cast<uint64_t>(lo) | (static_cast<uint64_t>(hi) << 32);
    __builtin_memcpy(out + i, &both, 8);
  }
  bytes_plain(index, table, out, n, i);
}

enum class Level { kPlain, kAvx2, kAvx512 };

Level level() {
  static const Level l = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return Level::kAvx512;
    if (__builtin_cpu_supports("avx2")) return Level::kAvx2;
    return Level::kPlain;
  }();
  return l;
}
#endif

}  // namespace

void look_up_floats(const uint8_t* codes, const float* map, float* out, int64_t n) {
#if defined(TITAN_X86_GATHERS)
  switch (level()) {
    case Level::kAvx512:
      return floats_avx512(codes, map, out, n);
    case Level::kAvx2:
      return floats_avx2(codes, map, out, n);
    case Level::kPlain:
      break;
  }
#endif
  floats_plain(codes, map, out, n, 0);
}

void look_up_bytes(const uint32_t* index, const uint8_t* table, uint8_t* out, int64_t n) {
#if defined(TITAN_X86_GATHERS)
  switch (level()) {
    case Level::kAvx512:
      return bytes_avx512(index, table, out, n);
    case Level::kAvx2:
      return bytes_avx2(index, table, out, n);
    case Level::kPlain:
      break;
  }
#endif
  bytes_plain(index, table, out, n, 0);
}

}  // namespace titan::kernels::cpu::vec

#if defined(TITAN_X86_GATHERS)
#pragma GCC diagnostic pop
#endif
