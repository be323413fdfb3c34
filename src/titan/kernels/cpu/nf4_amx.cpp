#include "titan/kernels/cpu/nf4_amx.h"

#include <ATen/Parallel.h>
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

#define TITAN_AMX_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,amx-tile,amx-bf16")))

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

// Forward, strips [s0, s1) of 64 weight rows: y[:, n] for those rows.
TITAN_AMX_TARGET void forward_strips(const uint16_t* xp, int64_t m_rows, int64_t m_blocks,
                                     const uint8_t* packed, const float* absmax, int64_t k,
                                     int64_t s0, int64_t s1, uint16_t* y, int64_t ldy) {
  const int64_t kc_count = k / 32;
  std::vector<uint16_t> strip(static_cast<size_t>(kStrip * k));  // 64 dequantised rows
  alignas(64) float c[4][256];
  configure_tiles();
  for (int64_t s = s0; s < s1; ++s) {
    const int64_t n0 = s * kStrip;
    dequantize_blocks(packed + n0 * k / 2, absmax + n0 * k / 64, kStrip * k / 64, strip.data());
    for (int64_t mb = 0; mb < m_blocks; mb += 2) {
      const uint16_t* b0 = xp + mb * kc_count * kTileValues;
      const uint16_t* b1 = b0 + kc_count * kTileValues;
      for (int64_t half = 0; half < 2; ++half) {
        const uint16_t* a0 = strip.data() + half * 32 * k;
        const uint16_t* a1 = a0 + kRows * k;
        _tile_zero(4);
        _tile_zero(5);
        _tile_zero(6);
        _tile_zero(7);
        for (int64_t kc = 0; kc < kc_count; ++kc) {
          _tile_loadd(0, a0 + kc * 32, k * 2);
          _tile_loadd(1, a1 + kc * 32, k * 2);
          _tile_loadd(2, b0 + kc * kTileValues, 64);
          _tile_loadd(3, b1 + kc * kTileValues, 64);
          _tile_dpbf16ps(4, 0, 2);
          _tile_dpbf16ps(5, 0, 3);
          _tile_dpbf16ps(6, 1, 2);
          _tile_dpbf16ps(7, 1, 3);
        }
        // C[n][m]: tile 4 rows n 0-15 of this half x block mb, 5 x block mb + 1, 6 and 7 the
        // rows 16-31.
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
  _tile_release();
}

// Backward, strips [s0, s1) of 64 weight columns: dx[:, k] for those columns. dy is [M_pad, N]
// with M_pad a multiple of 32 (rows beyond M zero).
TITAN_AMX_TARGET void backward_strips(const uint16_t* dy, int64_t m_rows, int64_t m_blocks,
                                      const uint8_t* packed, const float* absmax, int64_t n,
                                      int64_t k, int64_t s0, int64_t s1, uint16_t* dx) {
  const int64_t pairs = n / 2;
  // B tiles of the strip: 4 column tiles of 16, each [N/2 row pairs][16 columns][2 rows].
  std::vector<uint16_t> strip(static_cast<size_t>(4 * pairs * 32));
  alignas(64) float c[4][256];
  // Word indices interleaving two rows' columns 0-15 (and 16-31): a0 b0 a1 b1 ...
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
  configure_tiles();
  for (int64_t s = s0; s < s1; ++s) {
    const int64_t k0 = s * kStrip;
    for (int64_t p = 0; p < pairs; ++p) {
      // Rows 2p and 2p + 1, columns k0 .. k0 + 63: one block of each.
      const int64_t e0 = 2 * p * k + k0, e1 = e0 + k;
      const __m512i t0 = bf16_table(code, absmax[e0 / 64]);
      const __m512i t1 = bf16_table(code, absmax[e1 / 64]);
      const __m512i a_lo = dequantize32_bf16(packed + e0 / 2, t0);
      const __m512i a_hi = dequantize32_bf16(packed + e0 / 2 + 16, t0);
      const __m512i b_lo = dequantize32_bf16(packed + e1 / 2, t1);
      const __m512i b_hi = dequantize32_bf16(packed + e1 / 2 + 16, t1);
      uint16_t* row = strip.data() + p * 32;
      const int64_t tile_stride = pairs * 32;
      _mm512_storeu_si512(row, _mm512_permutex2var_epi16(a_lo, interleave_low, b_lo));
      _mm512_storeu_si512(row + tile_stride,
                          _mm512_permutex2var_epi16(a_lo, interleave_high, b_lo));
      _mm512_storeu_si512(row + 2 * tile_stride,
                          _mm512_permutex2var_epi16(a_hi, interleave_low, b_hi));
      _mm512_storeu_si512(row + 3 * tile_stride,
                          _mm512_permutex2var_epi16(a_hi, interleave_high, b_hi));
    }
    for (int64_t mb = 0; mb < m_blocks; mb += 2) {
      const uint16_t* a0 = dy + mb * kRows * n;
      const uint16_t* a1 = a0 + kRows * n;
      for (int64_t half = 0; half < 2; ++half) {
        const uint16_t* b0 = strip.data() + 2 * half * pairs * 32;
        const uint16_t* b1 = b0 + pairs * 32;
        _tile_zero(4);
        _tile_zero(5);
        _tile_zero(6);
        _tile_zero(7);
        for (int64_t nc = 0; nc < n / 32; ++nc) {
          _tile_loadd(0, a0 + nc * 32, n * 2);
          _tile_loadd(1, a1 + nc * 32, n * 2);
          _tile_loadd(2, b0 + nc * kTileValues, 64);
          _tile_loadd(3, b1 + nc * kTileValues, 64);
          _tile_dpbf16ps(4, 0, 2);
          _tile_dpbf16ps(5, 0, 3);
          _tile_dpbf16ps(6, 1, 2);
          _tile_dpbf16ps(7, 1, 3);
        }
        // C[m][k]: tile 4 rows of block mb x columns tile 2 half, 5 the next 16 columns, 6 and 7
        // block mb + 1.
        _tile_stored(4, c[0], 64);
        _tile_stored(5, c[1], 64);
        _tile_stored(6, c[2], 64);
        _tile_stored(7, c[3], 64);
        for (int q = 0; q < 4; ++q) {
          const int64_t m = (mb + q / 2) * kRows;
          if (m >= m_rows) continue;
          const int64_t col = k0 + (2 * half + q % 2) * 16;
          store_bf16(c[q], /*transpose=*/false, std::min(kRows, m_rows - m), dx + m * k + col, k);
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
  if (!amx_bf16 || !amx_tile || !cpu_has_avx512()) return false;
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

at::Tensor nf4_amx_forward(const at::Tensor& x, const Nf4Weight& w) {
  TORCH_CHECK(nf4_amx_supports(w, x.scalar_type()) && x.dim() == 2 && x.size(1) == w.cols &&
                  x.is_contiguous(),
              "nf4_amx_forward: a contiguous bfloat16 [M, ", w.cols, "] input expected");
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
    forward_strips(xp_bits, m, m_blocks, packed, absmax, k, s0, s1, out, n);
  });
  return y;
}

at::Tensor nf4_amx_backward(const at::Tensor& dy, const Nf4Weight& w) {
  TORCH_CHECK(nf4_amx_supports(w, dy.scalar_type()) && dy.dim() == 2 && dy.size(1) == w.rows &&
                  dy.is_contiguous(),
              "nf4_amx_backward: a contiguous bfloat16 [M, ", w.rows, "] gradient expected");
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
  at::parallel_for(0, k / kStrip, 1, [&](int64_t s0, int64_t s1) {
    backward_strips(dy_bits, m, m_blocks, packed, absmax, n, k, s0, s1, out);
  });
  return dx;
}

#else  // no AVX-512 / AMX code on this platform

bool nf4_amx_available() { return false; }
bool nf4_amx_supports(const Nf4Weight&, at::ScalarType) { return false; }
at::Tensor nf4_amx_forward(const at::Tensor&, const Nf4Weight&) {
  TORCH_CHECK(false, "nf4_amx_forward: no AMX kernels in this build");
}
at::Tensor nf4_amx_backward(const at::Tensor&, const Nf4Weight&) {
  TORCH_CHECK(false, "nf4_amx_backward: no AMX kernels in this build");
}

#endif

}  // namespace titan::kernels::cpu
