#include "titan/kernels/cpu/vector_math.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

// One clone per x86-64 level; elsewhere (another architecture or compiler) a single version.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(__APPLE__)
#define TITAN_VECTOR_CLONES \
  __attribute__((target_clones("default", "arch=x86-64-v3", "arch=x86-64-v4")))
#else
#define TITAN_VECTOR_CLONES
#endif

namespace titan::kernels::cpu::vec {
namespace {

constexpr int kLanes = 16;  // partial sums of a reduction

inline float bits_to_float(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline uint32_t float_to_bits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

// exp(x) in float32 to about 1 ulp: x = n ln2 + r with |r| <= ln2/2, exp(r) by the Cephes
// polynomial, 2^n put into the exponent bits. Branch-free (clamped to the normal range) so
// that loops calling it vectorise; std::exp is a library call that stops vectorisation.
inline float exp_approx(float x) {
  x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  // n = round(x / ln2) with the 1.5 * 2^23 trick (no rounding instruction needed).
  const float shifted = x * 1.44269504088896341f + 12582912.0f;
  const float n = shifted - 12582912.0f;
  const float r = x - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float er = p * r * r + r + 1.0f;
  const int32_t exponent = static_cast<int32_t>(n) + 127;
  return er * bits_to_float(static_cast<uint32_t>(exponent) << 23);
}

inline float sigmoid(float x) { return 1.0f / (1.0f + exp_approx(-x)); }

}  // namespace

TITAN_VECTOR_CLONES
void silu_mul(const float* g, const float* u, float* out, int64_t n) {
  for (int64_t j = 0; j < n; ++j) out[j] = g[j] * sigmoid(g[j]) * u[j];
}

TITAN_VECTOR_CLONES
void silu_mul_backward(const float* g, const float* u, const float* da, float* dg, float* du,
                       int64_t n) {
  for (int64_t j = 0; j < n; ++j) {
    const float sig = sigmoid(g[j]);
    dg[j] = da[j] * u[j] * sig * (1.0f + g[j] * (1.0f - sig));
    du[j] = da[j] * g[j] * sig;
  }
}

TITAN_VECTOR_CLONES
void axpy(float w, const float* y, float* acc, int64_t n) {
  for (int64_t j = 0; j < n; ++j) acc[j] += w * y[j];
}

TITAN_VECTOR_CLONES
void scale(float w, const float* y, float* out, int64_t n) {
  for (int64_t j = 0; j < n; ++j) out[j] = w * y[j];
}

TITAN_VECTOR_CLONES
void mul(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t j = 0; j < n; ++j) out[j] = a[j] * b[j];
}

TITAN_VECTOR_CLONES
void accumulate_product(const float* a, const float* b, float* acc, int64_t n) {
  for (int64_t j = 0; j < n; ++j) acc[j] += a[j] * b[j];
}

TITAN_VECTOR_CLONES
void scaled_difference(float s, const float* d, const float* x, float m, float* out, int64_t n) {
  for (int64_t j = 0; j < n; ++j) out[j] = s * (d[j] - x[j] * m);
}

TITAN_VECTOR_CLONES
float dot(const float* a, const float* b, int64_t n) {
  float lanes[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) lanes[l] += a[j + l] * b[j + l];
  for (int l = 0; j < n; ++j, ++l) lanes[l] += a[j] * b[j];
  float sum = 0.0f;
  for (int l = 0; l < kLanes; ++l) sum += lanes[l];
  return sum;
}

float sum_squares(const float* a, int64_t n) { return dot(a, a, n); }

TITAN_VECTOR_CLONES
float max_of(const float* x, int64_t n) {
  float lanes[kLanes];
  for (int l = 0; l < kLanes; ++l) lanes[l] = -std::numeric_limits<float>::infinity();
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) lanes[l] = x[j + l] > lanes[l] ? x[j + l] : lanes[l];
  for (int l = 0; j < n; ++j, ++l) lanes[l] = x[j] > lanes[l] ? x[j] : lanes[l];
  float top = lanes[0];
  for (int l = 1; l < kLanes; ++l) top = lanes[l] > top ? lanes[l] : top;
  return top;
}

namespace {

// One block of exp_shifted_sum: at most kBlock elements, each lane's float32 sum added into its
// float64 sum. kWrite false only sums.
template <bool kWrite>
__attribute__((always_inline)) inline void exp_shifted_block(const float* x, float shift,
                                                             float* out, int64_t n, double* sums) {
  float lanes[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) {
      const float e = exp_approx(x[j + l] - shift);
      if constexpr (kWrite) out[j + l] = e;
      lanes[l] += e;
    }
  for (int l = 0; j < n; ++j, ++l) {
    const float e = exp_approx(x[j] - shift);
    if constexpr (kWrite) out[j] = e;
    lanes[l] += e;
  }
  for (int l = 0; l < kLanes; ++l) sums[l] += lanes[l];
}

}  // namespace

TITAN_VECTOR_CLONES
double exp_shifted_sum(const float* x, float shift, float* out, int64_t n) {
  constexpr int64_t kBlock = 64 * kLanes;
  double sums[kLanes] = {};
  for (int64_t j = 0; j < n; j += kBlock) {
    const int64_t len = std::min(kBlock, n - j);
    if (out != nullptr)
      exp_shifted_block<true>(x + j, shift, out + j, len, sums);
    else
      exp_shifted_block<false>(x + j, shift, nullptr, len, sums);
  }
  double sum = 0.0;
  for (int l = 0; l < kLanes; ++l) sum += sums[l];
  return sum;
}

TITAN_VECTOR_CLONES
double sum_squares_f64(const float* x, int64_t n) {
  constexpr int kWide = 8;
  double lanes[kWide] = {};
  int64_t j = 0;
  for (; j + kWide <= n; j += kWide)
    for (int l = 0; l < kWide; ++l) {
      const double v = x[j + l];
      lanes[l] += v * v;
    }
  for (int l = 0; j < n; ++j, ++l) {
    const double v = x[j];
    lanes[l] += v * v;
  }
  double sum = 0.0;
  for (int l = 0; l < kWide; ++l) sum += lanes[l];
  return sum;
}

TITAN_VECTOR_CLONES
double sum_squares_f64(const uint16_t* bf16, int64_t n) {
  constexpr int kWide = 8;
  double lanes[kWide] = {};
  int64_t j = 0;
  for (; j + kWide <= n; j += kWide)
    for (int l = 0; l < kWide; ++l) {
      const double v = bits_to_float(static_cast<uint32_t>(bf16[j + l]) << 16);
      lanes[l] += v * v;
    }
  for (int l = 0; j < n; ++j, ++l) {
    const double v = bits_to_float(static_cast<uint32_t>(bf16[j]) << 16);
    lanes[l] += v * v;
  }
  double sum = 0.0;
  for (int l = 0; l < kWide; ++l) sum += lanes[l];
  return sum;
}

TITAN_VECTOR_CLONES
void bf16_to_float(const uint16_t* in, float* out, int64_t n) {
  for (int64_t j = 0; j < n; ++j) out[j] = bits_to_float(static_cast<uint32_t>(in[j]) << 16);
}

TITAN_VECTOR_CLONES
void float_to_bf16(const float* in, uint16_t* out, int64_t n) {
  for (int64_t j = 0; j < n; ++j) {
    const uint32_t bits = float_to_bits(in[j]);
    const uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
    out[j] = in[j] != in[j] ? uint16_t{0x7fc0} : static_cast<uint16_t>(rounded);
  }
}

}  // namespace titan::kernels::cpu::vec
