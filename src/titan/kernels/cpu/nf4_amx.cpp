#include "titan/kernels/cpu/nf4_amx.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <c10/util/Exception.h>

#include <vector>

#include "titan/kernels/cpu/nf4_avx512.h"

#ifdef TITAN_NF4_AVX512
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace titan::kernels::cpu {

#ifdef TITAN_NF4_AVX512
namespace {

using namespace nf4_avx512;

#define TITAN_AMX_TARGET \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,amx-tile,amx-bf16")))

// Every tile is 16 rows of 64 bytes: 16 x 32 bfloat16 (A and B) or 16 x 16 float32 (C). A tile
// of bfloat16 is 512 values.
constexpr int64_t kRows = 16;
constexpr int64_t kTileValues = 512;
// A strip: the weight rows (forward) or columns (backward) one pass dequantises, two tiles of
// 32 wide (forward: 2 x 32 rows; backward: 4 x 16 columns, one NF4 block of each row).
constexpr int64_t kStrip = 64;

// Tile registers: 0-1 A, 2-3 B, 4-7 C (the 2 x 2 products of the two A and the two B).
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

TITAN_AMX_TARGET void configure_tiles() {
  TileConfig config;
  for (int t = 0; t < 8; ++t) {
    config.rows[t] = kRows;
    config.colsb[t] = 64;
  }
  _tile_loadconfig(&config);
}

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

// `blocks` whole NF4 blocks (32 packed bytes and one scale each) into `out`, as bfloat16.
TITAN_AMX_TARGET inline void amx_dequantize_blocks(const uint8_t* packed, const float* absmax,
                                                   int64_t blocks, uint16_t* out) {
  const __m512 code = _mm512_loadu_ps(code_values());
  for (int64_t b = 0; b < blocks; ++b, packed += 32, out += 64) {
    const __m512i table = amx_table(code, absmax[b]);
    _mm512_storeu_si512(out, amx_dequantize32(packed, table));
    _mm512_storeu_si512(out + 32, amx_dequantize32(packed + 16, table));
  }
}

// A 16 x 16 matrix of 32-bit lanes (r[i] its row i) transposed in registers.
TITAN_AMX_TARGET inline void transpose16(__m512i r[16]) {
  __m512i t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  __m512i u[16];
  for (int i = 0; i < 4; ++i) {
    u[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
  // u[4i + j], 128-bit lane L: column 4L + j of rows 4i .. 4i + 3.
  for (int j = 0; j < 4; ++j) {
    const __m512i w0 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0x44);
    const __m512i w1 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0xEE);
    const __m512i w2 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0x44);
    const __m512i w3 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0xEE);
    r[j] = _mm512_shuffle_i32x4(w0, w2, 0x88);
    r[4 + j] = _mm512_shuffle_i32x4(w0, w2, 0xDD);
    r[8 + j] = _mm512_shuffle_i32x4(w1, w3, 0x88);
    r[12 + j] = _mm512_shuffle_i32x4(w1, w3, 0xDD);
  }
}

// Writes a C tile (16 x 16 float32, row i at c + 16 i) as bfloat16 rows of `out` (stride
// `ld`), only the first `rows` rows; transposed first when `transpose`.
TITAN_AMX_TARGET inline void store_bf16(const float* c, bool transpose, int64_t rows, uint16_t* out,
                                        int64_t ld) {
  __m512i r[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_si512(c + 16 * i);
  if (transpose) transpose16(r);
  for (int64_t i = 0; i < rows; ++i)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i * ld),
                        _mm512_cvtepi32_epi16(bf16_bits(_mm512_castsi512_ps(r[i]))));
}

// x [M, K] (rows beyond M read as zeros) -> the B tile (mb, kc) of x^T: its row p holds, for
// each of the 16 rows m of block mb, the pair x[m][32 kc + 2p], x[m][32 kc + 2p + 1].
TITAN_AMX_TARGET void pack_transposed_tile(const uint16_t* x, int64_t m_rows, int64_t k, int64_t mb,
                                           int64_t kc, uint16_t* tile) {
  __m512i r[16];
  for (int64_t i = 0; i < 16; ++i) {
    const int64_t m = mb * kRows + i;
    r[i] = m < m_rows ? _mm512_loadu_si512(x + m * k + kc * 32) : _mm512_setzero_si512();
  }
  transpose16(r);
  for (int i = 0; i < 16; ++i) _mm512_storeu_si512(tile + 32 * i, r[i]);
}

// Every B tile of x^T, tile (mb, kc) at out + (mb * KC + kc) * 512.
void pack_transposed(const uint16_t* x, int64_t m_rows, int64_t k, int64_t m_blocks,
                     uint16_t* out) {
  const int64_t kc_count = k / 32;
  at::parallel_for(0, m_blocks * kc_count, 64, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t)
      pack_transposed_tile(x, m_rows, k, t / kc_count, t % kc_count, out + t * kTileValues);
  });
}

// The forward's reduction in chunks of columns whose packed activations (M_pad x chunk
// bfloat16) take at most this many bytes, so that they stay in L2 while every strip of the
// weight passes over them; the partial sums wait in float32 between chunks.
constexpr int64_t kActivationChunkBytes = 1024 * 1024;

int64_t forward_chunk(int64_t k, int64_t m_blocks, int64_t widest) {
  if (widest <= 0) widest = kActivationChunkBytes / (m_blocks * kRows * 2);
  widest = std::max(kStrip, widest);
  const int64_t chunks = (k + widest - 1) / widest;
  return (k / chunks + kStrip - 1) / kStrip * kStrip;  // equal chunks, whole NF4 blocks
}

// Forward, strips [s0, s1) of 64 weight rows: y[:, n] for those rows.
TITAN_AMX_TARGET void forward_strips(const uint16_t* xp, int64_t m_rows, int64_t m_blocks,
                                     const uint8_t* packed, const float* absmax, int64_t k,
                                     int64_t s0, int64_t s1, uint16_t* y, int64_t ldy,
                                     int64_t widest) {
  const int64_t kc_count = k / 32, chunk = forward_chunk(k, m_blocks, widest);
  const int64_t m_pad = m_blocks * kRows;
  std::vector<uint16_t> strip(static_cast<size_t>(kStrip * chunk));  // 64 dequantised rows
  // Partial sums C[n][m] of the strips, [s1 - s0][64][M_pad], when there are several chunks.
  std::vector<float> sums(chunk < k ? static_cast<size_t>((s1 - s0) * kStrip * m_pad) : 0);
  alignas(64) float c[4][256];
  configure_tiles();
  for (int64_t c0 = 0; c0 < k; c0 += chunk) {
    const int64_t cols = std::min(chunk, k - c0);
    const bool first = c0 == 0, last = c0 + cols == k;
    for (int64_t s = s0; s < s1; ++s) {
      const int64_t n0 = s * kStrip;
      for (int64_t r = 0; r < kStrip; ++r) {
        const int64_t e = (n0 + r) * k + c0;
        amx_dequantize_blocks(packed + e / 2, absmax + e / 64, cols / 64, strip.data() + r * cols);
      }
      for (int64_t mb = 0; mb < m_blocks; mb += 2) {
        const uint16_t* b0 = xp + (mb * kc_count + c0 / 32) * kTileValues;
        const uint16_t* b1 = b0 + kc_count * kTileValues;
        for (int64_t half = 0; half < 2; ++half) {
          const uint16_t* a0 = strip.data() + half * 32 * cols;
          const uint16_t* a1 = a0 + kRows * cols;
          // C[n][m]: tile 4 rows n 0-15 of this half x block mb, 5 x block mb + 1, 6 and 7
          // the rows 16-31.
          float* p0 = sums.data() + ((s - s0) * kStrip + half * 32) * m_pad + mb * kRows;
          float* p1 = p0 + kRows * m_pad;
          if (first) {
            _tile_zero(4);
            _tile_zero(5);
            _tile_zero(6);
            _tile_zero(7);
          } else {
            _tile_loadd(4, p0, m_pad * 4);
            _tile_loadd(5, p0 + kRows, m_pad * 4);
            _tile_loadd(6, p1, m_pad * 4);
            _tile_loadd(7, p1 + kRows, m_pad * 4);
          }
          for (int64_t kc = 0; kc < cols / 32; ++kc) {
            _tile_loadd(0, a0 + kc * 32, cols * 2);
            _tile_loadd(1, a1 + kc * 32, cols * 2);
            _tile_loadd(2, b0 + kc * kTileValues, 64);
            _tile_loadd(3, b1 + kc * kTileValues, 64);
            _tile_dpbf16ps(4, 0, 2);
            _tile_dpbf16ps(5, 0, 3);
            _tile_dpbf16ps(6, 1, 2);
            _tile_dpbf16ps(7, 1, 3);
          }
          if (!last) {
            _tile_stored(4, p0, m_pad * 4);
            _tile_stored(5, p0 + kRows, m_pad * 4);
            _tile_stored(6, p1, m_pad * 4);
            _tile_stored(7, p1 + kRows, m_pad * 4);
            continue;
          }
          _tile_stored(4, c[0], 64);
          _tile_stored(5, c[1], 64);
          _tile_stored(6, c[2], 64);
          _tile_stored(7, c[3], 64);
          for (int q = 0; q < 4; ++q) {
            const int64_t m = (mb + q % 2) * kRows;
            if (m >= m_rows) continue;
            const int64_t n = n0 + half * 32 + (q / 2) * kRows;
            store_bf16(c[q], /*transpose=*/true, std::min(kRows, m_rows - m), y + m * ldy + n, ldy);
          }
        }
      }
    }
  }
  _tile_release();
}

// Backward blocks: dx's columns in chunks of kColumnChunk, the reduction over the weight's rows in
// chunks of kRowChunk, so that a chunk of the dequantised weight (256 KiB) and of dy (M x 512)
// stay in L2 while every 32 rows of dy pass over them; the partial sums wait in float32 between
// row chunks.
constexpr int64_t kColumnChunk = 256;
constexpr int64_t kRowChunk = 512;

// W[r0 .. r0 + rows, c0 .. c0 + cols] (cols a multiple of 64, one NF4 block per row and 64
// columns) as B tiles of VNNI pairs: tile (t, j), for columns c0 + 16 t .. + 16 and rows
// r0 + 32 j .. + 32, at out + (t * rows / 32 + j) * 512; its row p holds, for each of the 16
// columns, the weight's rows r0 + 32 j + 2p and + 1.
TITAN_AMX_TARGET void dequantize_pairs(const uint8_t* packed, const float* absmax, int64_t k,
                                       int64_t r0, int64_t rows, int64_t c0, int64_t cols,
                                       uint16_t* out) {
  // Word indices interleaving two rows' elements 0-15 (and 16-31): a0 b0 a1 b1 ...
  alignas(64) uint16_t low[32], high[32];
  for (int i = 0; i < 16; ++i) {
    low[2 * i] = static_cast<uint16_t>(i);
    low[2 * i + 1] = static_cast<uint16_t>(32 + i);
    high[2 * i] = static_cast<uint16_t>(16 + i);
    high[2 * i + 1] = static_cast<uint16_t>(48 + i);
  }
  const __m512i interleave_low = _mm512_load_si512(low);
  const __m512i interleave_high = _mm512_load_si512(high);
  const __m512 code = _mm512_loadu_ps(code_values());
  const int64_t tile_stride = rows / 2 * 32;  // values between column tiles t and t + 1
  for (int64_t p = 0; p < rows / 2; ++p) {
    int64_t e0 = (r0 + 2 * p) * k + c0;  // the pair's first element in this block column
    uint16_t* row = out + p * 32;
    for (int64_t b = 0; b < cols / 64; ++b, e0 += 64, row += 4 * tile_stride) {
      const int64_t e1 = e0 + k;
      const __m512i t0 = amx_table(code, absmax[e0 / 64]);
      const __m512i t1 = amx_table(code, absmax[e1 / 64]);
      const __m512i a_lo = amx_dequantize32(packed + e0 / 2, t0);
      const __m512i a_hi = amx_dequantize32(packed + e0 / 2 + 16, t0);
      const __m512i b_lo = amx_dequantize32(packed + e1 / 2, t1);
      const __m512i b_hi = amx_dequantize32(packed + e1 / 2 + 16, t1);
      _mm512_storeu_si512(row, _mm512_permutex2var_epi16(a_lo, interleave_low, b_lo));
      _mm512_storeu_si512(row + tile_stride,
                          _mm512_permutex2var_epi16(a_lo, interleave_high, b_lo));
      _mm512_storeu_si512(row + 2 * tile_stride,
                          _mm512_permutex2var_epi16(a_hi, interleave_low, b_hi));
      _mm512_storeu_si512(row + 3 * tile_stride,
                          _mm512_permutex2var_epi16(a_hi, interleave_high, b_hi));
    }
  }
}

// Backward, column chunks [c_begin, c_end) of dx. dy is [M_pad, N] with M_pad a multiple of 32
// (rows beyond M zero).
TITAN_AMX_TARGET void backward_chunks(const uint16_t* dy, int64_t m_rows, int64_t m_blocks,
                                      const uint8_t* packed, const float* absmax, int64_t n,
                                      int64_t k, int64_t c_begin, int64_t c_end, uint16_t* dx) {
  std::vector<uint16_t> weights(static_cast<size_t>(kRowChunk * kColumnChunk));
  // Partial sums [M_pad, kColumnChunk] between row chunks.
  std::vector<float> sums(static_cast<size_t>(m_blocks * kRows * kColumnChunk));
  alignas(64) float c[4][256];
  configure_tiles();
  for (int64_t chunk = c_begin; chunk < c_end; ++chunk) {
    const int64_t c0 = chunk * kColumnChunk, cols = std::min(kColumnChunk, k - c0);
    for (int64_t r0 = 0; r0 < n; r0 += kRowChunk) {
      const int64_t rows = std::min(kRowChunk, n - r0);
      const bool first = r0 == 0, last = r0 + rows == n;
      dequantize_pairs(packed, absmax, k, r0, rows, c0, cols, weights.data());
      const int64_t tile_stride = rows / 2 * 32;
      for (int64_t mb = 0; mb < m_blocks; mb += 2) {
        const uint16_t* a0 = dy + mb * kRows * n + r0;
        const uint16_t* a1 = a0 + kRows * n;
        for (int64_t t = 0; t < cols / 16; t += 2) {
          float* s0 = sums.data() + mb * kRows * kColumnChunk + t * 16;
          float* s1 = s0 + kRows * kColumnChunk;
          if (first) {
            _tile_zero(4);
            _tile_zero(5);
            _tile_zero(6);
            _tile_zero(7);
          } else {
            _tile_loadd(4, s0, kColumnChunk * 4);
            _tile_loadd(5, s0 + 16, kColumnChunk * 4);
            _tile_loadd(6, s1, kColumnChunk * 4);
            _tile_loadd(7, s1 + 16, kColumnChunk * 4);
          }
          const uint16_t* b0 = weights.data() + t * tile_stride;
          const uint16_t* b1 = b0 + tile_stride;
          for (int64_t j = 0; j < rows / 32; ++j) {
            _tile_loadd(0, a0 + j * 32, n * 2);
            _tile_loadd(1, a1 + j * 32, n * 2);
            _tile_loadd(2, b0 + j * kTileValues, 64);
            _tile_loadd(3, b1 + j * kTileValues, 64);
            _tile_dpbf16ps(4, 0, 2);
            _tile_dpbf16ps(5, 0, 3);
            _tile_dpbf16ps(6, 1, 2);
            _tile_dpbf16ps(7, 1, 3);
          }
          if (!last) {
            _tile_stored(4, s0, kColumnChunk * 4);
            _tile_stored(5, s0 + 16, kColumnChunk * 4);
            _tile_stored(6, s1, kColumnChunk * 4);
            _tile_stored(7, s1 + 16, kColumnChunk * 4);
            continue;
          }
          // C[m][col]: tile 4 rows of block mb x columns tile t, 5 the next 16 columns, 6 and 7
          // block mb + 1.
          _tile_stored(4, c[0], 64);
          _tile_stored(5, c[1], 64);
          _tile_stored(6, c[2], 64);
          _tile_stored(7, c[3], 64);
          for (int q = 0; q < 4; ++q) {
            const int64_t m = (mb + q / 2) * kRows;
            if (m >= m_rows) continue;
            const int64_t col = c0 + (t + q % 2) * 16;
            store_bf16(c[q], /*transpose=*/false, std::min(kRows, m_rows - m), dx + m * k + col, k);
          }
        }
      }
    }
  }
  _tile_release();
}

#pragma GCC diagnostic pop

bool amx_usable() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  const bool amx_bf16 = (d >> 22) & 1, amx_tile = (d >> 24) & 1;
  if (!__get_cpuid_count(7, 1, &a, &b, &c, &d)) return false;
  const bool avx512_bf16 = (a >> 5) & 1;
  if (!amx_bf16 || !amx_tile || !avx512_bf16 || !cpu_has_avx512()) return false;
  // Linux hands out the tile registers' state only to processes that ask (ARCH_REQ_XCOMP_PERM
  // for XFEATURE_XTILEDATA); the grant covers every thread of the process.
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}

int64_t padded_blocks(int64_t m) { return (m + 2 * kRows - 1) / (2 * kRows) * 2; }

const uint16_t* bits(const at::Tensor& t) {
  return reinterpret_cast<const uint16_t*>(t.const_data_ptr<at::BFloat16>());
}
uint16_t* bits(at::Tensor& t) {
  return reinterpret_cast<uint16_t*>(t.mutable_data_ptr<at::BFloat16>());
}

}  // namespace

bool nf4_amx_available() {
  static const bool available = amx_usable();
  return available;
}

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
  pack_transposed(bits(x), m, k, m_blocks, xp_bits);
  const uint8_t* packed = w.packed.const_data_ptr<uint8_t>();
  const float* absmax = w.absmax.const_data_ptr<float>();
  uint16_t* out = bits(y);
  at::parallel_for(0, n / kStrip, 1, [&](int64_t s0, int64_t s1) {
    forward_strips(xp_bits, m, m_blocks, packed, absmax, k, s0, s1, out, n, chunk_columns);
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
  const uint8_t* packed = w.packed.const_data_ptr<uint8_t>();
  const float* absmax = w.absmax.const_data_ptr<float>();
  uint16_t* out = bits(dx);
  at::parallel_for(0, (k + kColumnChunk - 1) / kColumnChunk, 1, [&](int64_t c0, int64_t c1) {
    backward_chunks(dy_bits, m, m_blocks, packed, absmax, n, k, c0, c1, out);
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
