// NF4 dequantisation with AVX-512 (kernels/nf4.h defines the format): a block's 16 values
// (code * absmax, float32 products) sit in one register and each element is a lane permutation
// by its nibble (vpermps / vpermw), 32 elements in a few instructions instead of 32 table reads;
// the values are those of the portable loop bit for bit. Compiled for AVX-512 whatever the
// build's target: call these only where cpu_has_avx512() (nf4.cpp, the AMX kernels).
#pragma once

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(__APPLE__)
#define TITAN_NF4_AVX512 1

#include <immintrin.h>

#include <cstdint>

#define TITAN_AVX512_TARGET __attribute__((target("avx512f,avx512bw,avx512vl")))

namespace titan::kernels::cpu::nf4_avx512 {

// Whether the running CPU has AVX-512 F, BW and VL.
bool cpu_has_avx512();

// The 16 NF4 values (kernels/nf4.h's nf4_code()), for the vector loads.
const float* code_values();

// GCC 12 warns about the intrinsics' own deliberately undefined pass-through operands
// (_mm512_undefined_*) once they are inlined.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

// A block's 16 values code[i] * absmax in float32.
TITAN_AVX512_TARGET inline __m512 block_values(__m512 code, float absmax) {
  return _mm512_mul_ps(code, _mm512_set1_ps(absmax));
}

// float32 lanes -> bfloat16 as c10::BFloat16 rounds (to nearest even, a NaN becomes 0x7FC0),
// one per dword lane (the high halves zero).
TITAN_AVX512_TARGET inline __m512i bf16_bits(__m512 v) {
  const __m512i bits = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_srli_epi32(
      _mm512_add_epi32(bits, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF))), 16);
  return _mm512_mask_mov_epi32(rounded, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q),
                               _mm512_set1_epi32(0x7FC0));
}

// The block's 16 bfloat16 values in the low 16 word lanes (indices never reach the upper ones).
TITAN_AVX512_TARGET inline __m512i bf16_table(__m512 code, float absmax) {
  return _mm512_castsi256_si512(_mm512_cvtepi32_epi16(bf16_bits(block_values(code, absmax))));
}

// Nibble indices of 8 packed bytes as 16 dword lanes, the high nibble first (element 2i is
// byte i's high nibble).
TITAN_AVX512_TARGET inline __m512i nibbles_as_dwords(const uint8_t* bytes) {
  const __m512i q = _mm512_cvtepu8_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(bytes)));
  return _mm512_or_si512(_mm512_srli_epi64(q, 4),
                         _mm512_slli_epi64(_mm512_and_si512(q, _mm512_set1_epi64(0x0F)), 32));
}

// Nibble indices of 16 packed bytes as 32 word lanes, the high nibble first.
TITAN_AVX512_TARGET inline __m512i nibbles_as_words(const uint8_t* bytes) {
  const __m512i d = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes)));
  return _mm512_or_si512(_mm512_srli_epi32(d, 4),
                         _mm512_slli_epi32(_mm512_and_si512(d, _mm512_set1_epi32(0x0F)), 16));
}

// 32 bfloat16 elements (16 packed bytes) through a block's table.
TITAN_AVX512_TARGET inline __m512i dequantize32_bf16(const uint8_t* bytes, __m512i table) {
  return _mm512_permutexvar_epi16(nibbles_as_words(bytes), table);
}

// `blocks` whole blocks of 64 elements (32 packed bytes and one scale each).
TITAN_AVX512_TARGET inline void dequantize_blocks(const uint8_t* packed, const float* absmax,
                                                  int64_t blocks, float* out) {
  const __m512 code = _mm512_loadu_ps(code_values());
  for (int64_t b = 0; b < blocks; ++b, packed += 32, out += 64) {
    const __m512 values = block_values(code, absmax[b]);
    for (int q = 0; q < 4; ++q)
      _mm512_storeu_ps(out + 16 * q,
                       _mm512_permutexvar_ps(nibbles_as_dwords(packed + 8 * q), values));
  }
}

TITAN_AVX512_TARGET inline void dequantize_blocks(const uint8_t* packed, const float* absmax,
                                                  int64_t blocks, uint16_t* out) {
  const __m512 code = _mm512_loadu_ps(code_values());
  for (int64_t b = 0; b < blocks; ++b, packed += 32, out += 64) {
    const __m512i table = bf16_table(code, absmax[b]);
    _mm512_storeu_si512(out, dequantize32_bf16(packed, table));
    _mm512_storeu_si512(out + 32, dequantize32_bf16(packed + 16, table));
  }
}

#pragma GCC diagnostic pop

}  // namespace titan::kernels::cpu::nf4_avx512

#endif
