#include "titan/kernels/cpu/amx_linear.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/custom_function.h>

#include "titan/kernels/cpu/amx_matmul.h"

namespace titan::kernels::cpu {

#ifdef TITAN_AMX_KERNELS
namespace {

using amx::kRows;
using amx::kStrip;
using amx::kTileValues;
using amx::padded_blocks;

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

// The weight's rows for the AMX kernels: float32 rounded to bfloat16 (to nearest even; a
// denormal becomes zero, as the tiles' products would take it anyway).
struct Fp32Fill {
  const float* w;
  int64_t k;
  TITAN_AMX_TARGET void row64(int64_t r, int64_t c, __m512i& lo, __m512i& hi) const {
    const float* p = w + r * k + c;
    const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(p + 16), _mm512_loadu_ps(p));
    const __m512bh b = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(p + 48), _mm512_loadu_ps(p + 32));
    lo = reinterpret_cast<const __m512i&>(a);
    hi = reinterpret_cast<const __m512i&>(b);
  }
};

// Rows 2p and 2p + 1 of block mc of a [M, W] bfloat16 matrix (zero beyond M), 32 columns from
// c, interleaved: lo holds columns c .. c + 15 as pairs, hi the next 16.
TITAN_AMX_TARGET inline void row_pairs(const uint16_t* a, int64_t m_rows, int64_t width, int64_t m,
                                       int64_t c, __m512i& lo, __m512i& hi) {
  const __m512i r0 = m < m_rows ? _mm512_loadu_si512(a + m * width + c) : _mm512_setzero_si512();
  const __m512i r1 =
      m + 1 < m_rows ? _mm512_loadu_si512(a + (m + 1) * width + c) : _mm512_setzero_si512();
  lo = _mm512_permutex2var_epi16(r0, amx::interleave_low(), r1);
  hi = _mm512_permutex2var_epi16(r0, amx::interleave_high(), r1);
}

// x [M, K] -> B tiles of VNNI pairs over the tokens: tile (kt, mc) at out + (kt * MC + mc) * 512,
// its row p holding, for the 16 columns kt * 16 .., x's rows 32 mc + 2p and + 1.
TITAN_AMX_TARGET void pack_pairs_block(const uint16_t* x, int64_t m_rows, int64_t k,
                                       int64_t mc_count, int64_t mc, uint16_t* out) {
  for (int64_t p = 0; p < kRows; ++p)
    for (int64_t c = 0; c < k; c += 32) {
      __m512i lo, hi;
      row_pairs(x, m_rows, k, mc * 32 + 2 * p, c, lo, hi);
      _mm512_storeu_si512(out + ((c / 16) * mc_count + mc) * kTileValues + p * 32, lo);
      _mm512_storeu_si512(out + ((c / 16 + 1) * mc_count + mc) * kTileValues + p * 32, hi);
    }
}

// dy [M, N] -> A tiles of dy^T: tile (nt, mc) at out + (nt * MC + mc) * 512, its row i holding,
// for the column n = 16 nt + i, the pairs of dy's rows 32 mc + 2p and + 1 (p = 0 .. 15).
TITAN_AMX_TARGET void pack_transposed_pairs_block(const uint16_t* dy, int64_t m_rows, int64_t n,
                                                  int64_t mc_count, int64_t mc, int64_t c,
                                                  uint16_t* out) {
  __m512i lo[16], hi[16];
  for (int64_t p = 0; p < kRows; ++p) row_pairs(dy, m_rows, n, mc * 32 + 2 * p, c, lo[p], hi[p]);
  amx::transpose16(lo);
  amx::transpose16(hi);
  uint16_t* t0 = out + ((c / 16) * mc_count + mc) * kTileValues;
  uint16_t* t1 = out + ((c / 16 + 1) * mc_count + mc) * kTileValues;
  for (int i = 0; i < 16; ++i) {
    _mm512_storeu_si512(t0 + 32 * i, lo[i]);
    _mm512_storeu_si512(t1 + 32 * i, hi[i]);
  }
}

// dW rows [32 b0, 32 b1): C = A (dy^T) x B (x pairs), summed over every token block, then stored
// (or added to `out`).
TITAN_AMX_TARGET void weight_grad_blocks(const uint16_t* da, const uint16_t* xb, int64_t mc_count,
                                         int64_t k, int64_t b0, int64_t b1, float* out,
                                         bool accumulate) {
  amx::configure_tiles();
  for (int64_t b = b0; b < b1; ++b) {
    const uint16_t* a0 = da + (2 * b) * mc_count * kTileValues;
    const uint16_t* a1 = a0 + mc_count * kTileValues;
    for (int64_t kt = 0; kt < k / 16; kt += 2) {
      float* c0 = out + (32 * b) * k + kt * 16;
      float* c1 = c0 + kRows * k;
      if (accumulate) {
        _tile_loadd(4, c0, k * 4);
        _tile_loadd(5, c0 + 16, k * 4);
        _tile_loadd(6, c1, k * 4);
        _tile_loadd(7, c1 + 16, k * 4);
      } else {
        _tile_zero(4);
        _tile_zero(5);
        _tile_zero(6);
        _tile_zero(7);
      }
      const uint16_t* x0 = xb + kt * mc_count * kTileValues;
      const uint16_t* x1 = x0 + mc_count * kTileValues;
      for (int64_t mc = 0; mc < mc_count; ++mc) {
        _tile_loadd(0, a0 + mc * kTileValues, 64);
        _tile_loadd(1, a1 + mc * kTileValues, 64);
        _tile_loadd(2, x0 + mc * kTileValues, 64);
        _tile_loadd(3, x1 + mc * kTileValues, 64);
        _tile_dpbf16ps(4, 0, 2);
        _tile_dpbf16ps(5, 0, 3);
        _tile_dpbf16ps(6, 1, 2);
        _tile_dpbf16ps(7, 1, 3);
      }
      _tile_stored(4, c0, k * 4);
      _tile_stored(5, c0 + 16, k * 4);
      _tile_stored(6, c1, k * 4);
      _tile_stored(7, c1 + 16, k * 4);
    }
  }
  _tile_release();
}

// A bfloat16 weight's rows as they are (a frozen weight held in the compute dtype).
struct Bf16Fill {
  const uint16_t* w;
  int64_t k;
  TITAN_AMX_TARGET void row64(int64_t r, int64_t c, __m512i& lo, __m512i& hi) const {
    const uint16_t* p = w + r * k + c;
    lo = _mm512_loadu_si512(p);
    hi = _mm512_loadu_si512(p + 32);
  }
};

#pragma GCC diagnostic pop

const uint16_t* bits(const at::Tensor& t) {
  return reinterpret_cast<const uint16_t*>(t.const_data_ptr<at::BFloat16>());
}
uint16_t* bits(at::Tensor& t) {
  return reinterpret_cast<uint16_t*>(t.mutable_data_ptr<at::BFloat16>());
}

bool weight_ok(const at::Tensor& w) {
  return w.defined() && w.is_cpu() &&
         (w.scalar_type() == at::kFloat || w.scalar_type() == at::kBFloat16) && w.dim() == 2 &&
         w.is_contiguous() && w.size(0) > 0 && w.size(1) > 0 && w.size(0) % kStrip == 0 &&
         w.size(1) % kStrip == 0;
}

void check_operands(const char* what, const at::Tensor& a, int64_t width,
                    const at::Tensor& weight) {
  TORCH_CHECK(amx::available() && weight_ok(weight), what,
              ": an AMX CPU and a contiguous float32 or bfloat16 weight with sides multiples of 64 "
              "expected, "
              "got ",
              weight.sizes());
  TORCH_CHECK(a.is_cpu() && a.scalar_type() == at::kBFloat16 && a.dim() == 2 &&
                  a.size(1) == width && a.is_contiguous(),
              what, ": a contiguous bfloat16 [M, ", width, "] operand expected, got ", a.sizes());
}

// y = x W^T through the AMX kernels; the backward's dW in float32.
struct AmxLinear : public torch::autograd::Function<AmxLinear> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            const at::Tensor& weight) {
    const at::Tensor rows = x.reshape({-1, weight.size(1)}).contiguous();
    ctx->save_for_backward({rows, weight});
    std::vector<int64_t> shape = x.sizes().vec();
    shape.back() = weight.size(0);
    return amx_mixed_forward(rows, weight).view(shape);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& rows = saved[0];
    const at::Tensor& weight = saved[1];
    at::Tensor dx, dw;
    if (!grads[0].defined()) return {dx, dw};
    const at::Tensor dy = grads[0].reshape({-1, weight.size(0)}).to(at::kBFloat16).contiguous();
    if (ctx->needs_input_grad(0)) {
      std::vector<int64_t> shape = grads[0].sizes().vec();
      shape.back() = weight.size(1);
      dx = amx_mixed_backward(dy, weight).view(shape);
    }
    if (ctx->needs_input_grad(1)) {
      dw = at::empty(weight.sizes(), weight.options());
      amx_weight_grad(dy, rows, dw);
    }
    return {dx, dw};
  }
};

}  // namespace

bool amx_matmul_supports(const at::Tensor& weight) { return weight_ok(weight) && amx::available(); }

bool amx_linear_supports(const at::Tensor& x, const at::Tensor& weight) {
  return x.is_cpu() && x.scalar_type() == at::kBFloat16 && x.dim() >= 1 && weight_ok(weight) &&
         weight.scalar_type() == at::kFloat && x.size(-1) == weight.size(1) && amx::available();
}

at::Tensor amx_linear(const at::Tensor& x, const at::Tensor& weight) {
  TORCH_CHECK(amx_linear_supports(x, weight), "amx_linear: bfloat16 [..., ", weight.size(-1),
              "] and an AMX-ready float32 weight expected, got ", x.sizes(), " ", x.scalar_type(),
              " and ", weight.sizes(), " ", weight.scalar_type());
  return AmxLinear::apply(x, weight);
}

// Calls f with the weight's Fill.
template <class F>
void with_fill(const at::Tensor& weight, F&& f) {
  const int64_t k = weight.size(1);
  if (weight.scalar_type() == at::kFloat)
    f(Fp32Fill{weight.const_data_ptr<float>(), k});
  else
    f(Bf16Fill{bits(weight), k});
}

at::Tensor amx_mixed_forward(const at::Tensor& x, const at::Tensor& weight) {
  at::Tensor y = at::empty({x.size(0), weight.size(0)}, x.options());
  amx_mixed_forward_out(x, weight, y);
  return y;
}

void amx_mixed_forward_out(const at::Tensor& x, const at::Tensor& weight, at::Tensor& y) {
  check_operands("amx_mixed_forward", x, weight.size(1), weight);
  const int64_t m = x.size(0), n = weight.size(0), k = weight.size(1);
  TORCH_CHECK(y.scalar_type() == at::kBFloat16 && y.dim() == 2 && y.size(0) == m &&
                  y.size(1) == n && y.stride(1) == 1,
              "amx_mixed_forward: a bfloat16 [", m, ", ", n,
              "] output with unit column stride "
              "expected, got ",
              y.sizes());
  // Named for the profiler (profiling.* traces): a GEMM, as aten::mm is.
  RECORD_FUNCTION("titan::amx_linear_forward", std::vector<c10::IValue>({x, weight}));
  if (m == 0) return;
  const int64_t m_blocks = padded_blocks(m);
  at::Tensor xp = at::empty({m_blocks * k * kRows}, x.options());
  uint16_t* xp_bits = bits(xp);
  amx::pack_transposed(bits(x), m, k, m_blocks, xp_bits);
  uint16_t* out = bits(y);
  const int64_t ldy = y.stride(0);
  with_fill(weight, [&](const auto& fill) {
    at::parallel_for(0, n / kStrip, 1, [&](int64_t s0, int64_t s1) {
      amx::forward_strips(fill, xp_bits, m, m_blocks, k, s0, s1, out, ldy, 0);
    });
  });
}

at::Tensor amx_mixed_backward(const at::Tensor& dy, const at::Tensor& weight) {
  check_operands("amx_mixed_backward", dy, weight.size(0), weight);
  RECORD_FUNCTION("titan::amx_linear_backward", std::vector<c10::IValue>({dy, weight}));
  const int64_t m = dy.size(0), n = weight.size(0), k = weight.size(1);
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
  with_fill(weight, [&](const auto& fill) {
    at::parallel_for(0, (k + amx::kColumnChunk - 1) / amx::kColumnChunk, 1,
                     [&](int64_t c0, int64_t c1) {
                       amx::backward_chunks(fill, dy_bits, m, m_blocks, n, k, c0, c1, out);
                     });
  });
  return dx;
}

void amx_weight_grad(const at::Tensor& dy, const at::Tensor& x, at::Tensor& out, bool accumulate) {
  TORCH_CHECK(amx::available() && dy.is_cpu() && x.is_cpu() && dy.scalar_type() == at::kBFloat16 &&
                  x.scalar_type() == at::kBFloat16 && dy.dim() == 2 && x.dim() == 2 &&
                  dy.size(0) == x.size(0) && dy.is_contiguous() && x.is_contiguous() &&
                  dy.size(1) % kStrip == 0 && x.size(1) % kStrip == 0 && dy.size(1) > 0 &&
                  x.size(1) > 0,
              "amx_weight_grad: contiguous bfloat16 dy [M, N] and x [M, K], N and K multiples "
              "of 64, on an AMX CPU expected, got ",
              dy.sizes(), " and ", x.sizes());
  const int64_t m = dy.size(0), n = dy.size(1), k = x.size(1);
  TORCH_CHECK(out.is_cpu() && out.scalar_type() == at::kFloat && out.is_contiguous() &&
                  out.dim() == 2 && out.size(0) == n && out.size(1) == k,
              "amx_weight_grad: a contiguous float32 [", n, ", ", k, "] output expected, got ",
              out.sizes());
  RECORD_FUNCTION("titan::amx_weight_grad", std::vector<c10::IValue>({dy, x}));
  if (m == 0) {
    if (!accumulate) out.zero_();
    return;
  }
  const int64_t mc_count = padded_blocks(m) / 2;  // blocks of 32 tokens
  at::Tensor da = at::empty({n * mc_count * 32}, dy.options());
  at::Tensor xb = at::empty({k * mc_count * 32}, x.options());
  const uint16_t* dy_bits = bits(dy);
  const uint16_t* x_bits = bits(x);
  uint16_t* da_bits = bits(da);
  uint16_t* xb_bits = bits(xb);
  at::parallel_for(0, mc_count, 1, [&](int64_t b, int64_t e) {
    for (int64_t mc = b; mc < e; ++mc) pack_pairs_block(x_bits, m, k, mc_count, mc, xb_bits);
  });
  at::parallel_for(0, mc_count * (n / 32), 1, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t)
      pack_transposed_pairs_block(dy_bits, m, n, mc_count, t % mc_count, (t / mc_count) * 32,
                                  da_bits);
  });
  float* o = out.mutable_data_ptr<float>();
  at::parallel_for(0, n / 32, 1, [&](int64_t b0, int64_t b1) {
    weight_grad_blocks(da_bits, xb_bits, mc_count, k, b0, b1, o, accumulate);
  });
}

#else  // no AMX code on this platform

bool amx_matmul_supports(const at::Tensor&) { return false; }
bool amx_linear_supports(const at::Tensor&, const at::Tensor&) { return false; }
at::Tensor amx_linear(const at::Tensor&, const at::Tensor&) {
  TORCH_CHECK(false, "amx_linear: no AMX kernels in this build");
}
at::Tensor amx_mixed_forward(const at::Tensor&, const at::Tensor&) {
  TORCH_CHECK(false, "amx_mixed_forward: no AMX kernels in this build");
}
void amx_mixed_forward_out(const at::Tensor&, const at::Tensor&, at::Tensor&) {
  TORCH_CHECK(false, "amx_mixed_forward: no AMX kernels in this build");
}
at::Tensor amx_mixed_backward(const at::Tensor&, const at::Tensor&) {
  TORCH_CHECK(false, "amx_mixed_backward: no AMX kernels in this build");
}
void amx_weight_grad(const at::Tensor&, const at::Tensor&, at::Tensor&, bool) {
  TORCH_CHECK(false, "amx_weight_grad: no AMX kernels in this build");
}

#endif

}  // namespace titan::kernels::cpu
