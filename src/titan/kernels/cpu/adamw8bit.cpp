// Compiled with -ffp-contract=off (CMakeLists.txt): every fused multiply-add below is an
// explicit std::fmaf where bitsandbytes' ATen ops fuse, and nothing else may be contracted, or
// the float32 results would differ from bitsandbytes' in their last bits.
// GCC 12 warns about the AVX-512 intrinsics' own undefined source operands
// (_mm512_undefined_*), wherever they are inlined.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include "titan/kernels/cpu/adamw8bit.h"

#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "titan/common/error.h"
#include "titan/kernels/cpu/mkl_sqrt.h"
#include "titan/kernels/cpu/table_lookup.h"
#include "titan/kernels/cpu/vector_math.h"
#include "titan/kernels/dynamic_map.h"

// One clone per x86-64 level, as in vector_math.cpp.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(__APPLE__)
#define TITAN_VECTOR_CLONES \
  __attribute__((target_clones("default", "arch=x86-64-v3", "arch=x86-64-v4")))
#else
#define TITAN_VECTOR_CLONES
#endif

namespace titan::kernels::cpu {
namespace {

constexpr int64_t kChunk = kAdamW8bitChunkBlocks * kQuantBlock;
constexpr int64_t kAheadBlocks = 2;

// A thread's working set for one chunk: the updated states, sqrt(v), and float32 copies of a
// bfloat16 parameter and gradient.
struct Scratch {
  std::vector<float> m, v, root, p, g;
  Scratch() : m(kChunk), v(kChunk), root(kChunk), p(kChunk), g(kChunk) {}
};

// Pass 1 over one block of `count` elements: m = fma(g, 1 - b1, m * b1) and
// v = fma((1 - b2) * g, g, v * b2) from the dequantised states (m and v hold the map values on
// entry, vec::look_up_floats); returns both new absmax values. The maxima are
// kept in kLanes partial lanes, so that the loop vectorises (a float max reduction does not,
// without -ffast-math); a max does not depend on the order.
constexpr int kLanes = 16;

TITAN_VECTOR_CLONES
void update_moments(const float* g, float absmax_m, float absmax_v, float beta1,
                    float one_minus_beta1, float beta2, float one_minus_beta2, float* m, float* v,
                    int64_t count, float* new_absmax_m, float* new_absmax_v) {
  float top_m[kLanes] = {}, top_v[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= count; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) {
      const float gi = g[i + l];
      const float mi = std::fmaf(gi, one_minus_beta1, (m[i + l] * absmax_m) * beta1);
      const float vi = std::fmaf(one_minus_beta2 * gi, gi, (v[i + l] * absmax_v) * beta2);
      m[i + l] = mi;
      v[i + l] = vi;
      const float am = std::fabs(mi), av = std::fabs(vi);
      top_m[l] = am > top_m[l] ? am : top_m[l];
      top_v[l] = av > top_v[l] ? av : top_v[l];
    }
  }
  for (int l = 0; i < count; ++i, ++l) {
    const float gi = g[i];
    const float mi = std::fmaf(gi, one_minus_beta1, (m[i] * absmax_m) * beta1);
    const float vi = std::fmaf(one_minus_beta2 * gi, gi, (v[i] * absmax_v) * beta2);
    m[i] = mi;
    v[i] = vi;
    top_m[l] = std::fabs(mi) > top_m[l] ? std::fabs(mi) : top_m[l];
    top_v[l] = std::fabs(vi) > top_v[l] ? std::fabs(vi) : top_v[l];
  }
  float best_m = 0.0f, best_v = 0.0f;
  for (int l = 0; l < kLanes; ++l) {
    best_m = top_m[l] > best_m ? top_m[l] : best_m;
    best_v = top_v[l] > best_v ? top_v[l] : best_v;
  }
  *new_absmax_m = best_m;
  *new_absmax_v = best_v;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(__APPLE__)
// update_moments in 512-bit vectors (the compiler's clone keeps to 256 bits): the same
// arithmetic, and max(|x|, top) is `|x| > top ? |x| : top` as there. Also says whether v has
// a lane that sqrt16 must not take.
__attribute__((target("avx512f,avx512dq"))) void update_moments_avx512(
    const float* g, float absmax_m, float absmax_v, float beta1, float one_minus_beta1, float beta2,
    float one_minus_beta2, float* m, float* v, int64_t count, float* new_absmax_m,
    float* new_absmax_v, bool* v_negative) {
  const __m512 scale_m = _mm512_set1_ps(absmax_m), scale_v = _mm512_set1_ps(absmax_v),
               b1 = _mm512_set1_ps(beta1), c1 = _mm512_set1_ps(one_minus_beta1),
               b2 = _mm512_set1_ps(beta2), c2 = _mm512_set1_ps(one_minus_beta2);
  __m512 top_m = _mm512_setzero_ps(), top_v = _mm512_setzero_ps();
  __mmask16 negative = 0;
  for (int64_t i = 0; i < count; i += 16) {
    const __mmask16 lanes =
        count - i >= 16 ? __mmask16{0xFFFF} : static_cast<__mmask16>((1u << (count - i)) - 1);
    const __m512 gi = _mm512_maskz_loadu_ps(lanes, g + i);
    const __m512 mi = _mm512_fmadd_ps(
        gi, c1, _mm512_mul_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(lanes, m + i), scale_m), b1));
    const __m512 vi = _mm512_fmadd_ps(
        _mm512_mul_ps(c2, gi), gi,
        _mm512_mul_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(lanes, v + i), scale_v), b2));
    _mm512_mask_storeu_ps(m + i, lanes, mi);
    _mm512_mask_storeu_ps(v + i, lanes, vi);
    top_m = _mm512_max_ps(_mm512_abs_ps(mi), top_m);  // zero lanes past the end change nothing
    top_v = _mm512_max_ps(_mm512_abs_ps(vi), top_v);
    negative |= sqrt16_negative(vi);
  }
  *v_negative = negative != 0;
  alignas(64) float lanes_m[16], lanes_v[16];
  _mm512_store_ps(lanes_m, top_m);
  _mm512_store_ps(lanes_v, top_v);
  float best_m = 0.0f, best_v = 0.0f;
  for (int l = 0; l < 16; ++l) {
    best_m = lanes_m[l] > best_m ? lanes_m[l] : best_m;
    best_v = lanes_v[l] > best_v ? lanes_v[l] : best_v;
  }
  *new_absmax_m = best_m;
  *new_absmax_v = best_v;
}

// One state's update_moments_avx512 arithmetic on 16 lanes from their map values.
template <bool kSecond>
__attribute__((target("avx512f,avx512dq"), always_inline)) inline void update_state16(
    __m512 value, const float* g, float* x, int64_t i, __mmask16 lanes, __m512 scale, __m512 b,
    __m512 c, __m512& top, __mmask16& negative) {
  const __m512 gi = _mm512_maskz_loadu_ps(lanes, g + i);
  const __m512 old = _mm512_mul_ps(_mm512_mul_ps(value, scale), b);
  const __m512 xi =
      kSecond ? _mm512_fmadd_ps(_mm512_mul_ps(c, gi), gi, old) : _mm512_fmadd_ps(gi, c, old);
  _mm512_mask_storeu_ps(x + i, lanes, xi);
  top = _mm512_max_ps(_mm512_abs_ps(xi), top);  // zero lanes past the end change nothing
  if constexpr (kSecond) negative |= sqrt16_negative(xi);
}

// Pass 1 for one state of one block with its dequantisation in registers (vec::floats64), 64
// elements at a time: update_moments_avx512's arithmetic for that state, without storing the
// map values and loading them back. kSecond: the state is v, fma((1 - b2) * g, g, v * b2), and
// *v_negative says whether it has a lane that sqrt16 must not take. Returns the new absmax.
template <bool kSecond>
__attribute__((target("avx512f,avx512bw,avx512dq,avx512vbmi"))) float dequantize_and_update_avx512(
    const uint8_t* codes, const vec::FloatMap& map, const float* g, float absmax, float beta,
    float one_minus_beta, float* x, int64_t count, bool* v_negative) {
  const vec::MapRegisters regs = vec::load_map(map);
  const __m512 scale = _mm512_set1_ps(absmax), b = _mm512_set1_ps(beta),
               c = _mm512_set1_ps(one_minus_beta);
  __m512 top = _mm512_setzero_ps();
  __mmask16 negative = 0;
  int64_t i = 0;
  for (; i + 64 <= count; i += 64) {
    __m512 values[4];
    vec::floats64(codes + i, regs, values);
    for (int q = 0; q < 4; ++q)
      update_state16<kSecond>(values[q], g, x, i + 16 * q, 0xFFFF, scale, b, c, top, negative);
  }
  if (i < count) {  // the end of the last block: its map values through memory
    vec::look_up_floats(codes + i, map, x + i, count - i);
    for (; i < count; i += 16) {
      const __mmask16 lanes =
          count - i >= 16 ? __mmask16{0xFFFF} : static_cast<__mmask16>((1u << (count - i)) - 1);
      update_state16<kSecond>(_mm512_maskz_loadu_ps(lanes, x + i), g, x, i, lanes, scale, b, c, top,
                              negative);
    }
  }
  if constexpr (kSecond) *v_negative = negative != 0;
  // In registers, not through a store and 16 scalar loads: top holds no NaN (max keeps its
  // second operand where the first is NaN) and no -0, so the order of the maxima does not matter.
  const __m256 eight =
      _mm256_max_ps(_mm512_extractf32x8_ps(top, 0), _mm512_extractf32x8_ps(top, 1));
  __m128 four = _mm_max_ps(_mm256_castps256_ps128(eight), _mm256_extractf128_ps(eight, 1));
  four = _mm_max_ps(four, _mm_movehl_ps(four, four));
  return _mm_cvtss_f32(_mm_max_ss(four, _mm_shuffle_ps(four, four, 1)));
}
#endif

// Pass 3 over one block: p = p * decay + (step_size * m) / (root / c2 + eps).
TITAN_VECTOR_CLONES
void update_parameter(float* p, const float* m, const float* root, float decay, float step_size,
                      float bias_correction2_sqrt, float eps, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    const float denom = root[i] / bias_correction2_sqrt + eps;
    p[i] = p[i] * decay + (step_size * m[i]) / denom;
  }
}

// Both maps and quantisation tables in the look-ups' layouts (table_lookup.h), built once.
const vec::FloatMap& float_map(bool is_signed) {
  static const vec::FloatMap signed_map(dynamic_map(true).const_data_ptr<float>()),
      unsigned_map(dynamic_map(false).const_data_ptr<float>());
  return is_signed ? signed_map : unsigned_map;
}

const vec::GridTable& grid_table(bool is_signed) {
  static const vec::GridTable signed_table(quantize_table(true)),
      unsigned_table(quantize_table(false));
  return is_signed ? signed_table : unsigned_table;
}

// One block's codes of its updated state.
void quantize(const float* x, const vec::GridTable& table, float absmax, uint8_t* codes,
              int64_t count) {
  if (absmax == 0.0f) {  // a block of zeros is index 0 (1 / 0 would make NaN points)
    std::memset(codes, 0, static_cast<size_t>(count));
    return;
  }
  vec::quantize(x, 1.0f / absmax, table, codes, count);
}

#if defined(TITAN_MKL_SQRT_INLINE) && defined(TITAN_QUANTIZE_AVX512)
#define TITAN_ADAMW8BIT_AVX512 1
// Passes 2 and 3 over one block in one loop, where the inline root applies (mkl_sqrt.h) and
// the block's v has no negative value (none from AdamW's arithmetic): each
// root is taken in registers and used at once, with update_parameter's arithmetic, and both
// states are quantised from the same registers (quantize16). One loop lets the divisions and
// the gathers, which use different units, overlap. A block of zeros gets its codes after.
__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl"))) void update_and_quantize_avx512(
    float* p, const float* m, const float* v, const AdamW8bitFloats& s, float absmax_m,
    float absmax_v, const vec::GridTable& table_m, const vec::GridTable& table_v, uint8_t* codes_m,
    uint8_t* codes_v, int64_t count) {
  const __m512 decay = _mm512_set1_ps(s.decay), step_size = _mm512_set1_ps(s.step_size),
               c2 = _mm512_set1_ps(s.bias_correction2_sqrt), eps = _mm512_set1_ps(s.eps),
               inverse_m = _mm512_set1_ps(1.0f / absmax_m),
               inverse_v = _mm512_set1_ps(1.0f / absmax_v);
  for (int64_t i = 0; i < count; i += 16) {
    const __mmask16 lanes =
        count - i >= 16 ? __mmask16{0xFFFF} : static_cast<__mmask16>((1u << (count - i)) - 1);
    const __m512 m16 = _mm512_maskz_loadu_ps(lanes, m + i),
                 v16 = _mm512_maskz_loadu_ps(lanes, v + i);
    const __m512 root = sqrt16(v16);
    const __m512 denom = _mm512_add_ps(_mm512_div_ps(root, c2), eps);
    const __m512 update = _mm512_div_ps(_mm512_mul_ps(step_size, m16), denom);
    _mm512_mask_storeu_ps(
        p + i, lanes,
        _mm512_add_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(lanes, p + i), decay), update));
    _mm_mask_storeu_epi8(codes_m + i, lanes,
                         _mm512_cvtepi32_epi8(vec::quantize16(m16, inverse_m, table_m)));
    _mm_mask_storeu_epi8(codes_v + i, lanes,
                         _mm512_cvtepi32_epi8(vec::quantize16(v16, inverse_v, table_v)));
  }
  if (absmax_m == 0.0f) std::memset(codes_m, 0, static_cast<size_t>(count));
  if (absmax_v == 0.0f) std::memset(codes_v, 0, static_cast<size_t>(count));
}

// update_and_quantize_avx512 64 elements at a time where the CPU has VBMI: the codes of four
// vectors are packed into one (vec::pack64) and stored at once. The end of the last block
// takes update_and_quantize_avx512.
__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vbmi"))) void
update_and_quantize64_avx512(float* p, const float* m, const float* v, const AdamW8bitFloats& s,
                             float absmax_m, float absmax_v, const vec::GridTable& table_m,
                             const vec::GridTable& table_v, uint8_t* codes_m, uint8_t* codes_v,
                             int64_t count) {
  const __m512 decay = _mm512_set1_ps(s.decay), step_size = _mm512_set1_ps(s.step_size),
               c2 = _mm512_set1_ps(s.bias_correction2_sqrt), eps = _mm512_set1_ps(s.eps),
               inverse_m = _mm512_set1_ps(1.0f / absmax_m),
               inverse_v = _mm512_set1_ps(1.0f / absmax_v);
  int64_t i = 0;
  for (; i + 64 <= count; i += 64) {
    __m512i gm[4], gv[4];
    for (int q = 0; q < 4; ++q) {
      const int64_t at = i + 16 * q;
      const __m512 m16 = _mm512_loadu_ps(m + at), v16 = _mm512_loadu_ps(v + at);
      const __m512 root = sqrt16(v16);
      const __m512 denom = _mm512_add_ps(_mm512_div_ps(root, c2), eps);
      const __m512 update = _mm512_div_ps(_mm512_mul_ps(step_size, m16), denom);
      _mm512_storeu_ps(p + at,
                       _mm512_add_ps(_mm512_mul_ps(_mm512_loadu_ps(p + at), decay), update));
      gm[q] = vec::gather16(m16, inverse_m, table_m);
      gv[q] = vec::gather16(v16, inverse_v, table_v);
    }
    _mm512_storeu_si512(codes_m + i, vec::pack64(gm[0], gm[1], gm[2], gm[3]));
    _mm512_storeu_si512(codes_v + i, vec::pack64(gv[0], gv[1], gv[2], gv[3]));
  }
  if (i < count)
    update_and_quantize_avx512(p + i, m + i, v + i, s, absmax_m, absmax_v, table_m, table_v,
                               codes_m + i, codes_v + i, count - i);
  if (absmax_m == 0.0f) std::memset(codes_m, 0, static_cast<size_t>(count));
  if (absmax_v == 0.0f) std::memset(codes_v, 0, static_cast<size_t>(count));
}
#endif

// Asks for `bytes` from `begin` to be brought into the cache ahead of their use. The passes
// below touch each array in bursts (the gradient only in pass 1, the parameter only in pass 3),
// so the hardware prefetchers, which follow the misses they see, fall behind and each pass would
// wait on DRAM in turn.
void prefetch(const void* begin, int64_t bytes) {
  const char* p = static_cast<const char*>(begin);
  for (int64_t at = 0; at < bytes; at += 64) __builtin_prefetch(p + at);
}

template <typename T>
void step_blocks(T* param, const T* grad, uint8_t* codes_m, float* absmax_m, uint8_t* codes_v,
                 float* absmax_v, int64_t n, int64_t first_block, int64_t end_block,
                 const AdamW8bitFloats& s) {
  constexpr bool kFloat32 = std::is_same_v<T, float>;
  const vec::FloatMap& map_m = float_map(true);
  const vec::FloatMap& map_v = float_map(false);
  const vec::GridTable& table_m = grid_table(true);
  const vec::GridTable& table_v = grid_table(false);
  Scratch scratch;
#if defined(TITAN_ADAMW8BIT_AVX512)
  // Asked on each thread: MXCSR is its own.
  const bool inline_sqrt = mkl_sqrt_inline_ok() && vec::quantize16_ok();
  const bool fused_moments = inline_sqrt && vec::floats64_ok();
#else
  constexpr bool inline_sqrt = false;
#endif
  for (int64_t chunk = first_block; chunk < end_block; chunk += kAdamW8bitChunkBlocks) {
    const int64_t chunk_end = std::min(end_block, chunk + kAdamW8bitChunkBlocks);
    const int64_t begin = chunk * kQuantBlock, end = std::min(n, chunk_end * kQuantBlock);
    const int64_t size = end - begin;
    const float* g = nullptr;
    float* p = nullptr;
    if constexpr (kFloat32) {
      g = grad + begin;
      p = param + begin;
    } else {
      vec::bf16_to_float(reinterpret_cast<const uint16_t*>(grad + begin), scratch.g.data(), size);
      vec::bf16_to_float(reinterpret_cast<const uint16_t*>(param + begin), scratch.p.data(), size);
      g = scratch.g.data();
      p = scratch.p.data();
    }
    // Each pass asks, block by block, for its arrays' lines kAheadBlocks blocks on (or this
    // block's again near the end): a few lines at a time, as a burst of more lines than the
    // core's fill buffers would stall it.
    auto ahead = [&](int64_t block) {
      return std::min(block + kAheadBlocks < end_block ? block + kAheadBlocks : block,
                      end_block - 1) *
             kQuantBlock;
    };
    auto ahead_size = [&](int64_t at) { return std::min(n - at, kQuantBlock); };
    bool v_negative[kAdamW8bitChunkBlocks] = {};
    for (int64_t b = chunk; b < chunk_end; ++b) {
      const int64_t at = b * kQuantBlock - begin,
                    count = std::min(kQuantBlock, n - b * kQuantBlock);
      const int64_t next = ahead(b);
      prefetch(codes_m + next, ahead_size(next));
      prefetch(codes_v + next, ahead_size(next));
#if defined(TITAN_ADAMW8BIT_AVX512)
      if (fused_moments) {
        prefetch(grad + next, ahead_size(next) * static_cast<int64_t>(sizeof(T)));
        absmax_m[b] = dequantize_and_update_avx512<false>(codes_m + begin + at, map_m, g + at,
                                                          absmax_m[b], s.beta1, s.one_minus_beta1,
                                                          scratch.m.data() + at, count, nullptr);
        absmax_v[b] = dequantize_and_update_avx512<true>(
            codes_v + begin + at, map_v, g + at, absmax_v[b], s.beta2, s.one_minus_beta2,
            scratch.v.data() + at, count, &v_negative[b - chunk]);
        continue;
      }
#endif
      vec::look_up_floats(codes_m + begin + at, map_m, scratch.m.data() + at, count);
      vec::look_up_floats(codes_v + begin + at, map_v, scratch.v.data() + at, count);
      prefetch(grad + next, ahead_size(next) * static_cast<int64_t>(sizeof(T)));
#if defined(TITAN_ADAMW8BIT_AVX512)
      if (inline_sqrt)
        update_moments_avx512(g + at, absmax_m[b], absmax_v[b], s.beta1, s.one_minus_beta1, s.beta2,
                              s.one_minus_beta2, scratch.m.data() + at, scratch.v.data() + at,
                              count, &absmax_m[b], &absmax_v[b], &v_negative[b - chunk]);
      else
#endif
        update_moments(g + at, absmax_m[b], absmax_v[b], s.beta1, s.one_minus_beta1, s.beta2,
                       s.one_minus_beta2, scratch.m.data() + at, scratch.v.data() + at, count,
                       &absmax_m[b], &absmax_v[b]);
    }
    if (!inline_sqrt) aten_sqrt(scratch.v.data(), scratch.root.data(), size);
    for (int64_t b = chunk; b < chunk_end; ++b) {
      const int64_t at = b * kQuantBlock - begin,
                    count = std::min(kQuantBlock, n - b * kQuantBlock);
      const int64_t next = ahead(b);
      prefetch(param + next, ahead_size(next) * static_cast<int64_t>(sizeof(T)));
#if defined(TITAN_ADAMW8BIT_AVX512)
      if (fused_moments && !v_negative[b - chunk]) {
        update_and_quantize64_avx512(p + at, scratch.m.data() + at, scratch.v.data() + at, s,
                                     absmax_m[b], absmax_v[b], table_m, table_v,
                                     codes_m + begin + at, codes_v + begin + at, count);
        continue;
      }
      if (inline_sqrt && !v_negative[b - chunk]) {
        update_and_quantize_avx512(p + at, scratch.m.data() + at, scratch.v.data() + at, s,
                                   absmax_m[b], absmax_v[b], table_m, table_v, codes_m + begin + at,
                                   codes_v + begin + at, count);
        continue;
      }
#endif
      if (inline_sqrt)  // a negative v (not from AdamW): MKL's own roots for this block
        aten_sqrt(scratch.v.data() + at, scratch.root.data() + at, count);
      update_parameter(p + at, scratch.m.data() + at, scratch.root.data() + at, s.decay,
                       s.step_size, s.bias_correction2_sqrt, s.eps, count);
      quantize(scratch.m.data() + at, table_m, absmax_m[b], codes_m + begin + at, count);
      quantize(scratch.v.data() + at, table_v, absmax_v[b], codes_v + begin + at, count);
    }
    if constexpr (!kFloat32)
      vec::float_to_bf16(p, reinterpret_cast<uint16_t*>(param + begin), size);
  }
}

}  // namespace

void adamw8bit_step(at::Tensor& param, const at::Tensor& grad, BlockwiseQuantized& exp_avg,
                    BlockwiseQuantized& exp_avg_sq, const AdamW8bitFloats& s) {
  const int64_t n = param.numel();
  const int64_t blocks = quant_blocks(n);
  uint8_t* codes_m = exp_avg.codes.mutable_data_ptr<uint8_t>();
  uint8_t* codes_v = exp_avg_sq.codes.mutable_data_ptr<uint8_t>();
  float* absmax_m = exp_avg.absmax.mutable_data_ptr<float>();
  float* absmax_v = exp_avg_sq.absmax.mutable_data_ptr<float>();
  // Built before the threads start (function-local statics).
  for (const bool is_signed : {true, false}) {
    (void)float_map(is_signed);
    (void)grid_table(is_signed);
  }
#if defined(TITAN_ADAMW8BIT_AVX512)
  (void)mkl_sqrt_inline_ok();  // its one check against vsSqrt, before the threads start
#endif
  auto run = [&](auto* p, const auto* g) {
    at::parallel_for(0, blocks, kAdamW8bitGrainBlocks, [&](int64_t first, int64_t end) {
      step_blocks(p, g, codes_m, absmax_m, codes_v, absmax_v, n, first, end, s);
    });
  };
  if (param.scalar_type() == at::kFloat) {
    run(param.mutable_data_ptr<float>(), grad.const_data_ptr<float>());
  } else {
    TITAN_CHECK(param.scalar_type() == at::kBFloat16, "AdamW8bit: parameters must be float32 or ",
                "bfloat16, got ", param.scalar_type());
    run(param.mutable_data_ptr<c10::BFloat16>(), grad.const_data_ptr<c10::BFloat16>());
  }
}

}  // namespace titan::kernels::cpu
