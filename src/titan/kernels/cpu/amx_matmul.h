// The AMX machinery of the CPU kernels that multiply by a weight held in another form than
// bfloat16 (NF4: nf4_amx.h; float32 master weights under bfloat16 compute: amx_linear.h): the
// weight is converted a strip at a time straight into the layout AMX's tile loads read, in
// buffers that stay in the core's L2, so the bfloat16 weight never goes to memory and no GEMM
// library repacks it. Each kernel supplies the conversion (a Fill: row64(r, c, lo, hi) writes the
// bfloat16 values of the weight's row r, columns c .. c + 63, into two registers).
//
// Tiles: 16 rows of 64 bytes (16 x 32 bfloat16 for A and B, 16 x 16 float32 for C); registers
// 0-1 hold two A tiles, 2-3 two B tiles, 4-7 their four products. Every output is a float32 sum
// of products rounded once, in a fixed order: the same bits at any thread count. Only for the
// .cpp files of kernels/cpu/ that implement such kernels. See docs/kernels.md.
#pragma once

#include "titan/kernels/cpu/nf4_avx512.h"

#ifdef TITAN_NF4_AVX512
#define TITAN_AMX_KERNELS 1

#include <algorithm>
#include <cstdint>
#include <vector>

#define TITAN_AMX_TARGET \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,amx-tile,amx-bf16")))

namespace titan::kernels::cpu::amx {

// Whether this CPU has AMX-BF16, AVX512-BF16 and AVX-512, and the kernel lets the process use the
// tile registers (asked for once).
bool available();

constexpr int64_t kRows = 16;         // of a tile
constexpr int64_t kTileValues = 512;  // bfloat16 values in a tile
// A strip: the weight rows (forward) one pass converts, two pairs of A tiles.
constexpr int64_t kStrip = 64;

// Token blocks of 16 in pairs (the kernels take two tiles of tokens at a time).
inline int64_t padded_blocks(int64_t m) { return (m + 2 * kRows - 1) / (2 * kRows) * 2; }

// x [M, K] (bfloat16, contiguous) -> every B tile of x^T, tile (mb, kc) at out + (mb * K / 32 +
// kc) * 512 (rows beyond M zero); the forward's activations.
void pack_transposed(const uint16_t* x, int64_t m_rows, int64_t k, int64_t m_blocks, uint16_t* out);

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

// Tile registers: 0-1 A, 2-3 B, 4-7 C (the 2 x 2 products of the two A and the two B).
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

TITAN_AMX_TARGET inline void configure_tiles() {
  TileConfig config;
  for (int t = 0; t < 8; ++t) {
    config.rows[t] = kRows;
    config.colsb[t] = 64;
  }
  _tile_loadconfig(&config);
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
                        _mm512_cvtepi32_epi16(nf4_avx512::bf16_bits(_mm512_castsi512_ps(r[i]))));
}

// x [M, K] (rows beyond M read as zeros) -> the B tile (mb, kc) of x^T: its row p holds, for
// each of the 16 rows m of block mb, the pair x[m][32 kc + 2p], x[m][32 kc + 2p + 1].
TITAN_AMX_TARGET inline void pack_transposed_tile(const uint16_t* x, int64_t m_rows, int64_t k,
                                                  int64_t mb, int64_t kc, uint16_t* tile) {
  __m512i r[16];
  for (int64_t i = 0; i < 16; ++i) {
    const int64_t m = mb * kRows + i;
    r[i] = m < m_rows ? _mm512_loadu_si512(x + m * k + kc * 32) : _mm512_setzero_si512();
  }
  transpose16(r);
  for (int i = 0; i < 16; ++i) _mm512_storeu_si512(tile + 32 * i, r[i]);
}

// Word indices for _mm512_permutex2var_epi16 that interleave two rows' elements 0-15 (and
// 16-31): a0 b0 a1 b1 ... (AMX's VNNI pairs).
TITAN_AMX_TARGET inline __m512i interleave_low() {
  return _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7, 38,
                          6, 37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
}
TITAN_AMX_TARGET inline __m512i interleave_high() {
  return _mm512_set_epi16(63, 31, 62, 30, 61, 29, 60, 28, 59, 27, 58, 26, 57, 25, 56, 24, 55, 23,
                          54, 22, 53, 21, 52, 20, 51, 19, 50, 18, 49, 17, 48, 16);
}

// The forward's reduction in chunks of columns whose packed activations (M_pad x chunk
// bfloat16) take at most this many bytes, so that they stay in L2 while every strip of the
// weight passes over them; the partial sums wait in float32 between chunks.
constexpr int64_t kActivationChunkBytes = 1024 * 1024;

inline int64_t forward_chunk(int64_t k, int64_t m_blocks, int64_t widest) {
  if (widest <= 0) widest = kActivationChunkBytes / (m_blocks * kRows * 2);
  widest = std::max(kStrip, widest);
  const int64_t chunks = (k + widest - 1) / widest;
  return (k / chunks + kStrip - 1) / kStrip * kStrip;  // equal chunks, whole NF4 blocks
}

// Forward, strips [s0, s1) of 64 weight rows: y[:, n] for those rows, the weight's rows from
// `weight` (a Fill: row64(r, c, lo, hi) writes the bfloat16 values of its row r, columns c .. c +
// 63, into two registers).
template <class Fill>
TITAN_AMX_TARGET void forward_strips(const Fill& weight, const uint16_t* xp, int64_t m_rows,
                                     int64_t m_blocks, int64_t k, int64_t s0, int64_t s1,
                                     uint16_t* y, int64_t ldy, int64_t widest) {
  const int64_t kc_count = k / 32, chunk = forward_chunk(k, m_blocks, widest);
  const int64_t m_pad = m_blocks * kRows;
  std::vector<uint16_t> strip(static_cast<size_t>(kStrip * chunk));  // 64 rows in bfloat16
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
        uint16_t* out = strip.data() + r * cols;
        for (int64_t b = 0; b < cols; b += 64) {
          __m512i lo, hi;
          weight.row64(n0 + r, c0 + b, lo, hi);
          _mm512_storeu_si512(out + b, lo);
          _mm512_storeu_si512(out + b + 32, hi);
        }
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

// W[r0 .. r0 + rows, c0 .. c0 + cols] (cols a multiple of 64) as B tiles of VNNI pairs: tile
// (t, j), for columns c0 + 16 t .. + 16 and rows r0 + 32 j .. + 32, at out + (t * rows / 32 + j)
// * 512; its row p holds, for each of the 16 columns, the weight's rows r0 + 32 j + 2p and + 1.
template <class Fill>
TITAN_AMX_TARGET void weight_pairs(const Fill& weight, int64_t r0, int64_t rows, int64_t c0,
                                   int64_t cols, uint16_t* out) {
  const __m512i low = interleave_low(), high = interleave_high();
  const int64_t tile_stride = rows / 2 * 32;  // values between column tiles t and t + 1
  for (int64_t p = 0; p < rows / 2; ++p) {
    uint16_t* row = out + p * 32;
    for (int64_t b = 0; b < cols; b += 64, row += 4 * tile_stride) {
      __m512i a_lo, a_hi, b_lo, b_hi;
      weight.row64(r0 + 2 * p, c0 + b, a_lo, a_hi);
      weight.row64(r0 + 2 * p + 1, c0 + b, b_lo, b_hi);
      _mm512_storeu_si512(row, _mm512_permutex2var_epi16(a_lo, low, b_lo));
      _mm512_storeu_si512(row + tile_stride, _mm512_permutex2var_epi16(a_lo, high, b_lo));
      _mm512_storeu_si512(row + 2 * tile_stride, _mm512_permutex2var_epi16(a_hi, low, b_hi));
      _mm512_storeu_si512(row + 3 * tile_stride, _mm512_permutex2var_epi16(a_hi, high, b_hi));
    }
  }
}

// Backward, column chunks [c_begin, c_end) of dx = dy W, the weight's rows from `weight` (as
// forward_strips'). dy is [M_pad, N] with M_pad a multiple of 32 (rows beyond M zero).
template <class Fill>
TITAN_AMX_TARGET void backward_chunks(const Fill& weight, const uint16_t* dy, int64_t m_rows,
                                      int64_t m_blocks, int64_t n, int64_t k, int64_t c_begin,
                                      int64_t c_end, uint16_t* dx) {
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
      weight_pairs(weight, r0, rows, c0, cols, weights.data());
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

}  // namespace titan::kernels::cpu::amx

#endif
