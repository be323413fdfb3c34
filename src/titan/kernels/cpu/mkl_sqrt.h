// MKL's float32 vector square root as its AVX-512 kernel computes it, in registers. ATen's sqrt,
// and so bitsandbytes' v.sqrt() in its AdamW8bit step, calls MKL's vsSqrt on x86 torch wheels;
// its result is not always the correctly rounded root (about 0.6% of inputs differ from
// sqrtps), so the AdamW8bit kernel must give its bits. vsSqrt's AVX-512 high-accuracy kernel
// (mkl_vml_kernel_sSqrt_Z0HAynn, MXCSR set to round to nearest without FTZ/DAZ) takes, with
// y = rsqrt14(x), the 14-bit estimate of 1 / sqrt(x):
//   s = x * y,  h = y * 0.5,  root = fma(x - s * s, h, s)    (x - s * s fused, all to nearest)
// and, where y > 2^39 (x < 2^-78, zero included), the same with x * 2^78, s * 2^39 and
// h * 2^-78, so that x - s * s keeps its bits instead of underflowing. +0 and +inf are their
// own roots; negative lanes (-0 included) take MKL's rare path, so are left to vsSqrt itself.
// Computing it inline saves a library call per block, and a store and load of every root.
// sqrt16 is used only where mkl_sqrt_matches() found it equal to vsSqrt, bit for bit, on
// inputs spread over every binade (a machine whose MKL takes another kernel uses vsSqrt).
#pragma once

#include <cstdint>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(__APPLE__)
#include <immintrin.h>
#define TITAN_MKL_SQRT_INLINE 1
#endif

namespace titan::kernels::cpu {

// ATen's float32 sqrt over n values: vsSqrt where libtorch exports it, else at::sqrt_out.
void aten_sqrt(const float* in, float* out, int64_t n);

#if defined(TITAN_MKL_SQRT_INLINE)
// True where the CPU has AVX-512 and sqrt16 equals aten_sqrt on the check set (once), and the
// calling thread's MXCSR rounds to nearest without FTZ/DAZ.
bool mkl_sqrt_inline_ok();

// aten_sqrt's bits through sqrt16 (for the tests; only where mkl_sqrt_inline_ok()).
void mkl_sqrt_inline(const float* in, float* out, int64_t n);

// Lanes that sqrt16 must not be given: negative ones, -0 included (MKL's error path).
__attribute__((target("avx512f,avx512dq"), always_inline)) inline __mmask16 sqrt16_negative(
    __m512 x) {
  return _mm512_fpclass_ps_mask(x, 0x54);  // -0, -inf, x < 0
}

// The roots of 16 floats without negative lanes.
__attribute__((target("avx512f,avx512dq"), always_inline)) inline __m512 sqrt16(__m512 x) {
  constexpr int kNearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  const __m512 y = _mm512_rsqrt14_ps(x);
  __m512 h = _mm512_mul_round_ps(y, _mm512_set1_ps(0.5f), kNearest);
  const __m512 s = _mm512_mul_round_ps(y, x, kNearest);
  const __mmask16 tiny = _mm512_cmp_ps_mask(_mm512_set1_ps(0x1p39f), y, _CMP_LT_OS);
  __m512 root;
  if (tiny == 0) {
    root = _mm512_fmadd_round_ps(_mm512_fnmadd_round_ps(s, s, x, kNearest), h, s, kNearest);
  } else {
    const __m512 xs = _mm512_mask_mul_round_ps(x, tiny, x, _mm512_set1_ps(0x1p78f), kNearest);
    const __m512 ss = _mm512_mask_mul_round_ps(s, tiny, s, _mm512_set1_ps(0x1p39f), kNearest);
    h = _mm512_mask_mul_round_ps(h, tiny, h, _mm512_set1_ps(0x1p-78f), kNearest);
    root = _mm512_fmadd_round_ps(_mm512_fnmadd_round_ps(ss, ss, xs, kNearest), h, s, kNearest);
  }
  return _mm512_mask_mov_ps(root, _mm512_fpclass_ps_mask(x, 0x0a), x);  // +0, +inf
}
#endif

}  // namespace titan::kernels::cpu
