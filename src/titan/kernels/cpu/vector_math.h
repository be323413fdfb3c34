// The inner loops of the CPU kernels, over contiguous float32 rows. They are compiled once per
// x86-64 level (baseline, v3 = AVX2+FMA, v4 = AVX-512) and the best one for the running CPU
// is picked at load time (GCC/Clang target_clones), so a binary built for any x86-64 machine
// still uses the wide vectors of the machine it runs on. Every loop is branch-free so that the
// compiler vectorises it; reductions keep 16 partial sums combined in a fixed order, so a
// result does not depend on which clone runs. See docs/kernels.md.
#pragma once

#include <cstdint>

namespace titan::kernels::cpu::vec {

// out[j] = silu(g[j]) * u[j]
void silu_mul(const float* g, const float* u, float* out, int64_t n);
// dg[j] = da[j] * u[j] * silu'(g[j]),  du[j] = da[j] * silu(g[j])
void silu_mul_backward(const float* g, const float* u, const float* da, float* dg, float* du,
                       int64_t n);
// acc[j] += w * y[j]
void axpy(float w, const float* y, float* acc, int64_t n);
// out[j] = w * y[j]
void scale(float w, const float* y, float* out, int64_t n);
// out[j] = a[j] * b[j]
void mul(const float* a, const float* b, float* out, int64_t n);
// acc[j] += a[j] * b[j]
void accumulate_product(const float* a, const float* b, float* acc, int64_t n);
// out[j] = s * (d[j] - x[j] * m)   (the RMSNorm input gradient)
void scaled_difference(float s, const float* d, const float* x, float m, float* out, int64_t n);
// sum_j a[j] * b[j]
float dot(const float* a, const float* b, int64_t n);
// sum_j a[j] * a[j]
float sum_squares(const float* a, int64_t n);

// max_j x[j] (a NaN may be skipped: it reaches the sum through exp_shifted_sum)
float max_of(const float* x, int64_t n);
// out[j] = exp(x[j] - shift), and sum_j out[j]; out may be x, or null to only sum. The float32
// sums of every block of 1024 elements are added into float64 per lane, and the lanes merged in
// a fixed order, so the sum keeps about float64 accuracy over a whole vocabulary.
double exp_shifted_sum(const float* x, float shift, float* out, int64_t n);

// sum_j x[j]^2 with each square and the sum in float64 (a float32 value squares exactly in
// float64), 8 float64 lanes combined in a fixed order.
double sum_squares_f64(const float* x, int64_t n);
double sum_squares_f64(const uint16_t* bf16, int64_t n);

// bfloat16 <-> float32 (round to nearest even; NaN stays NaN), as c10::BFloat16 converts.
void bf16_to_float(const uint16_t* in, float* out, int64_t n);
void float_to_bf16(const float* in, uint16_t* out, int64_t n);

}  // namespace titan::kernels::cpu::vec
