#include "titan/kernels/cpu/nf4_amx.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <c10/util/Exception.h>

#include <vector>

#include "titan/kernels/cpu/amx_matmul.h"

namespace titan::kernels::cpu {

#ifdef TITAN_AMX_KERNELS
namespace {

using namespace nf4_avx512;
using amx::kRows;
using amx::kStrip;
using amx::padded_blocks;

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

// A block's 16 bfloat16 values (code * absmax, rounded to nearest even by the CPU's own
// conversion) in both 256-bit halves of a register, so that bit 4 of an index picks either copy:
// the nibbles need no masking. Unlike c10's rounding (nf4_avx512.h), the conversion flushes
// denormals to zero and keeps a NaN's payload; the tiles' products treat denormal inputs as zero
// anyway.
TITAN_AMX_TARGET inline __m512i amx_table(__m512 code, float absmax) {
  const __m256bh values = _mm512_cvtneps_pbh(_mm512_mul_ps(code, _mm512_set1_ps(absmax)));
  return _mm512_broadcast_i64x4(reinterpret_cast<const __m256i&>(values));
}

// 32 elements (16 packed bytes) through amx_table's table: word 2i is byte i >> 4 (its high
// nibble), word 2i + 1 byte i itself (its low nibble, the high one landing in bit 4, which picks
// the table's copy, and in bits vpermw ignores).
TITAN_AMX_TARGET inline __m512i amx_dequantize32(const uint8_t* bytes, __m512i table) {
  const __m512i d = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes)));
  return _mm512_permutexvar_epi16(
      _mm512_or_si512(_mm512_srli_epi32(d, 4), _mm512_slli_epi32(d, 16)), table);
}

// The weight's rows for the AMX kernels (amx_matmul.h): 64 values of a row are one NF4 block
// (the kernels take weights whose rows are whole blocks).
struct Nf4Fill {
  const uint8_t* packed;
  const float* absmax;
  int64_t k;
  __m512 code;
  TITAN_AMX_TARGET void row64(int64_t r, int64_t c, __m512i& lo, __m512i& hi) const {
    const int64_t e = r * k + c;
    const __m512i table = amx_table(code, absmax[e / 64]);
    lo = amx_dequantize32(packed + e / 2, table);
    hi = amx_dequantize32(packed + e / 2 + 16, table);
  }
};

TITAN_AMX_TARGET Nf4Fill nf4_fill(const Nf4Weight& w) {
  return Nf4Fill{w.packed.const_data_ptr<uint8_t>(), w.absmax.const_data_ptr<float>(), w.cols,
                 _mm512_loadu_ps(code_values())};
}

#pragma GCC diagnostic pop

const uint16_t* bits(const at::Tensor& t) {
  return reinterpret_cast<const uint16_t*>(t.const_data_ptr<at::BFloat16>());
}
uint16_t* bits(at::Tensor& t) {
  return reinterpret_cast<uint16_t*>(t.mutable_data_ptr<at::BFloat16>());
}

}  // namespace

bool nf4_amx_available() { return amx::available(); }

bool nf4_amx_supports(const Nf4Weight& w, at::ScalarType dtype) {
  return dtype == at::kBFloat16 && w.blocksize == 64 && w.rows % kStrip == 0 &&
         w.cols % kStrip == 0 && w.rows > 0 && w.cols > 0 && w.packed.is_cpu() &&
         nf4_amx_available();
}

at::Tensor nf4_amx_forward(const at::Tensor& x, const Nf4Weight& w, int64_t chunk_columns) {
  TORCH_CHECK(nf4_amx_supports(w, x.scalar_type()) && x.dim() == 2 && x.size(1) == w.cols &&
                  x.is_contiguous(),
              "nf4_amx_forward: a contiguous bfloat16 [M, ", w.cols, "] input expected");
  // Named for the profiler (profiling.* traces): the weight's GEMM, as aten::mm is.
  RECORD_FUNCTION("titan::nf4_amx_forward", std::vector<c10::IValue>({x}));
  const int64_t m = x.size(0), n = w.rows, k = w.cols;
  at::Tensor y = at::empty({m, n}, x.options());
  if (m == 0) return y;
  const int64_t m_blocks = padded_blocks(m);
  at::Tensor xp = at::empty({m_blocks * k * kRows}, x.options());
  uint16_t* xp_bits = bits(xp);
  amx::pack_transposed(bits(x), m, k, m_blocks, xp_bits);
  uint16_t* out = bits(y);
  const Nf4Fill fill = nf4_fill(w);
  at::parallel_for(0, n / kStrip, 1, [&](int64_t s0, int64_t s1) {
    amx::forward_strips(fill, xp_bits, m, m_blocks, k, s0, s1, out, n, chunk_columns);
  });
  return y;
}

at::Tensor nf4_amx_backward(const at::Tensor& dy, const Nf4Weight& w) {
  TORCH_CHECK(nf4_amx_supports(w, dy.scalar_type()) && dy.dim() == 2 && dy.size(1) == w.rows &&
                  dy.is_contiguous(),
              "nf4_amx_backward: a contiguous bfloat16 [M, ", w.rows, "] gradient expected");
  RECORD_FUNCTION("titan::nf4_amx_backward", std::vector<c10::IValue>({dy}));
  const int64_t m = dy.size(0), n = w.rows, k = w.cols;
  at::Tensor dx = at::empty({m, k}, dy.options());
  if (m == 0) return dx;
  const int64_t m_blocks = padded_blocks(m);
  // The tiles read whole blocks of 32 rows: a copy with zero rows when M is not a multiple.
  at::Tensor rows = dy;
  if (m_blocks * kRows != m) {
    rows = at::zeros({m_blocks * kRows, n}, dy.options());
    rows.narrow(0, 0, m).copy_(dy);
  }
  const uint16_t* dy_bits = bits(rows);
  uint16_t* out = bits(dx);
  const Nf4Fill fill = nf4_fill(w);
  at::parallel_for(0, (k + amx::kColumnChunk - 1) / amx::kColumnChunk, 1,
                   [&](int64_t c0, int64_t c1) {
                     amx::backward_chunks(fill, dy_bits, m, m_blocks, n, k, c0, c1, out);
                   });
  return dx;
}

#else  // no AVX-512 / AMX code on this platform

bool nf4_amx_available() { return false; }
bool nf4_amx_supports(const Nf4Weight&, at::ScalarType) { return false; }
at::Tensor nf4_amx_forward(const at::Tensor&, const Nf4Weight&, int64_t) {
  TORCH_CHECK(false, "nf4_amx_forward: no AMX kernels in this build");
}
at::Tensor nf4_amx_backward(const at::Tensor&, const Nf4Weight&) {
  TORCH_CHECK(false, "nf4_amx_backward: no AMX kernels in this build");
}

#endif

}  // namespace titan::kernels::cpu
