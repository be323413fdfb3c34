// GCC 12 warns about the AVX-512 intrinsics' own undefined source operands
// (_mm512_undefined_*), wherever they are inlined.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include "titan/kernels/cpu/mkl_sqrt.h"

#include <ATen/ATen.h>

#include <cstring>
#include <vector>

// MKL's vector square root, which ATen's float32 sqrt calls on x86 torch wheels (exported by
// libtorch_cpu there; weak, so that it is null where the build has no MKL).
extern "C" __attribute__((weak)) void vsSqrt(int n, const float* in, float* out);

namespace titan::kernels::cpu {

// Called directly where present (the same bits as at::sqrt, the unit tests check, without an
// operator dispatch per block); else through ATen.
void aten_sqrt(const float* in, float* out, int64_t n) {
  if (vsSqrt != nullptr) {
    vsSqrt(static_cast<int>(n), in, out);
    return;
  }
  const at::Tensor x = at::from_blob(const_cast<float*>(in), {n}, at::kFloat);
  at::Tensor result = at::from_blob(out, {n}, at::kFloat);
  at::sqrt_out(result, x);
}

#if defined(TITAN_MKL_SQRT_INLINE)
namespace {

__attribute__((target("avx512f,avx512dq"))) void sqrt_avx512(const float* in, float* out,
                                                             int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 lanes =
        n - i >= 16 ? __mmask16{0xFFFF} : static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512 x = _mm512_maskz_loadu_ps(lanes, in + i);
    const __mmask16 negative = sqrt16_negative(x);
    _mm512_mask_storeu_ps(out + i, lanes, sqrt16(x));
    for (int l = 0; l < 16; ++l)
      if ((negative & lanes) >> l & 1) aten_sqrt(in + i + l, out + i + l, 1);
  }
}

// Every 4099th non-negative float32 bit pattern (every binade, subnormals, both sides of
// 2^-78, NaNs), zeros, infinities and a few negatives: the inline root must give vsSqrt's bits
// on all. (Negative lanes go to vsSqrt one by one, through its slow error path: few here.)
bool inline_equals_aten() {
  std::vector<float> x;
  for (uint64_t bits = 0; bits <= 0x7FFFFFFFu; bits += 4099) {
    float v = 0;
    const auto b = static_cast<uint32_t>(bits);
    std::memcpy(&v, &b, 4);
    x.push_back(v);
  }
  for (const float v : {0.0f, -0.0f, 0x1p-78f, 0x1p-149f, 1.0f, -1.0f, __builtin_inff(),
                        -__builtin_inff(), __builtin_nanf("")})
    x.push_back(v);
  std::vector<float> expected(x.size()), got(x.size());
  aten_sqrt(x.data(), expected.data(), static_cast<int64_t>(x.size()));
  sqrt_avx512(x.data(), got.data(), static_cast<int64_t>(x.size()));
  return std::memcmp(expected.data(), got.data(), x.size() * sizeof(float)) == 0;
}

}  // namespace

void mkl_sqrt_inline(const float* in, float* out, int64_t n) { sqrt_avx512(in, out, n); }

bool mkl_sqrt_inline_ok() {
  static const bool ok = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
           inline_equals_aten();
  }();
  // MKL computes to nearest without FTZ/DAZ whatever the caller's MXCSR; the inline root
  // rounds to nearest by its instructions, but its rsqrt14 reads inputs through DAZ.
  return ok && (_mm_getcsr() & 0x8040u) == 0;
}
#endif

}  // namespace titan::kernels::cpu
