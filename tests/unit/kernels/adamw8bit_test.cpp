// The fused AdamW8bit kernel against the reference (bitsandbytes' sequence of ATen ops over
// whole tensors, kernels/adamw8bit.h) on ragged tails, blocks of zeros, bfloat16 parameters
// and any number of threads; the bits against bitsandbytes itself are checked in
// tests/integration/test_adamw8bit_peer.py.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>
#include <vector>

#include "titan/kernels/adamw8bit.h"
#include "titan/kernels/blockwise_8bit.h"
#include "titan/kernels/cpu/mkl_sqrt.h"
#include "titan/kernels/cpu/table_lookup.h"
#include "titan/kernels/dynamic_map.h"

namespace titan::kernels {
namespace {

BlockwiseQuantized zero_state(int64_t n) {
  return {at::zeros({n}, at::kByte), at::zeros({quant_blocks(n)}, at::kFloat)};
}

struct Result {
  at::Tensor param;
  BlockwiseQuantized m, v;
};

// `steps` steps of both implementations on the same gradients; the gradients of [zero_begin,
// zero_end) are zero (blocks of zeros in both states).
std::pair<Result, Result> run_both(int64_t n, int steps, at::ScalarType dtype, double weight_decay,
                                   int64_t zero_begin = 0, int64_t zero_end = 0) {
  at::manual_seed(n + steps);
  const at::Tensor p0 = at::randn({n}).to(dtype);
  Result fused{p0.clone(), zero_state(n), zero_state(n)};
  Result reference{p0.clone(), zero_state(n), zero_state(n)};
  for (int step = 1; step <= steps; ++step) {
    at::Tensor g = (at::randn({n}) * (step % 2 ? 1.0 : 1e-3)).to(dtype);
    g.slice(0, zero_begin, zero_end).zero_();
    AdamStepScalars s;
    s.lr = 1e-2 / step;
    s.beta1 = 0.9;
    s.beta2 = 0.95;
    s.eps = 1e-8;
    s.weight_decay = weight_decay;
    s.step = step;
    adamw8bit_step_fused(fused.param, g, fused.m, fused.v, s);
    adamw8bit_step_reference(reference.param, g, reference.m, reference.v, s);
  }
  return {fused, reference};
}

void expect_same(const Result& a, const Result& b) {
  EXPECT_TRUE(at::equal(a.m.codes, b.m.codes)) << "first moment codes";
  EXPECT_TRUE(at::equal(a.v.codes, b.v.codes)) << "second moment codes";
  EXPECT_TRUE(at::equal(a.m.absmax, b.m.absmax)) << "first moment absmax";
  EXPECT_TRUE(at::equal(a.v.absmax, b.v.absmax)) << "second moment absmax";
  EXPECT_TRUE(at::equal(a.param, b.param))
      << "parameter: max difference "
      << (a.param.to(at::kDouble) - b.param.to(at::kDouble)).abs().max().item<double>();
}

TEST(AdamW8bit, FusedEqualsReferenceOnRaggedTails) {
  for (const int64_t n : {4096, 4097, 4351, 10000, 256 * 33 + 1, 100003}) {
    SCOPED_TRACE(n);
    const auto [fused, reference] = run_both(n, 4, at::kFloat, 0.1);
    expect_same(fused, reference);
  }
}

TEST(AdamW8bit, BlocksOfZerosAreIndexZeroWithZeroAbsmax) {
  // Elements 256..1023 never see a gradient: three whole blocks of zeros, and the partial
  // blocks around them mix zeros with values.
  const auto [fused, reference] = run_both(5000, 3, at::kFloat, 0.0, 200, 1100);
  expect_same(fused, reference);
  for (const BlockwiseQuantized* s : {&fused.m, &fused.v}) {
    EXPECT_TRUE(at::equal(s->absmax.slice(0, 1, 4), at::zeros({3})));
    EXPECT_TRUE(at::equal(s->codes.slice(0, 256, 1024), at::zeros({768}, at::kByte)));
    EXPECT_GT(s->absmax[0].item<float>(), 0);
    EXPECT_GT(s->absmax[4].item<float>(), 0);
  }
}

TEST(AdamW8bit, BFloat16ParametersRoundOnceFromFloat32) {
  const auto [fused, reference] = run_both(9000, 3, at::kBFloat16, 0.1);
  EXPECT_EQ(fused.param.scalar_type(), at::kBFloat16);
  expect_same(fused, reference);
}

// beta2 > 1 makes v negative in some blocks (AdamW's own arithmetic never does): those blocks
// take MKL's roots by its own call (NaN parameters), the others the kernel's inline root; every
// bit, NaNs included, as the reference.
TEST(AdamW8bit, BlocksWithNegativeSecondMomentsTakeMklsOwnRoots) {
  const int64_t n = 4096 + 300;
  at::manual_seed(5);
  const at::Tensor p0 = at::randn({n});
  Result fused{p0.clone(), zero_state(n), zero_state(n)};
  Result reference{p0.clone(), zero_state(n), zero_state(n)};
  for (int step = 1; step <= 2; ++step) {
    at::Tensor g = at::randn({n});
    g.slice(0, 0, 2048).mul_(step == 1 ? 1.0 : 100.0);  // v < 0 in these blocks at step 2
    AdamStepScalars s;
    s.beta2 = step == 1 ? 0.95 : 1.5;
    s.step = step;
    adamw8bit_step_fused(fused.param, g, fused.m, fused.v, s);
    adamw8bit_step_reference(reference.param, g, reference.m, reference.v, s);
  }
  EXPECT_TRUE(fused.param.isnan().any().item<bool>());
  EXPECT_TRUE(at::equal(fused.param.view(at::kInt), reference.param.view(at::kInt)));
  EXPECT_TRUE(at::equal(fused.v.codes, reference.v.codes));
  EXPECT_TRUE(at::equal(fused.v.absmax, reference.v.absmax));
  EXPECT_TRUE(at::equal(fused.m.codes, reference.m.codes));
}

TEST(AdamW8bit, ResultDoesNotDependOnTheThreads) {
  const int before = at::get_num_threads();
  at::set_num_threads(1);
  const Result one = run_both(70000, 2, at::kFloat, 0.1).first;
  at::set_num_threads(3);
  const Result three = run_both(70000, 2, at::kFloat, 0.1).first;
  at::set_num_threads(before);
  expect_same(one, three);
}

TEST(Blockwise8bit, QuantisedValuesDequantiseNearThemselves) {
  at::manual_seed(3);
  const at::Tensor x = at::randn({7, 300}) * at::logspace(-4, 1, 300);
  for (const bool is_signed : {true, false}) {
    const at::Tensor in = is_signed ? x : x.abs();
    const BlockwiseQuantized q = quantize_blockwise(in, is_signed);
    EXPECT_EQ(q.codes.sizes(), in.sizes());
    EXPECT_EQ(q.absmax.numel(), quant_blocks(in.numel()));
    // Each block's absmax is its largest magnitude, and every value comes back within the
    // map's spacing at its magnitude (at most about 1/16 of the block's absmax near 1).
    const at::Tensor flat = in.reshape({-1});
    for (int64_t b = 0; b < q.absmax.numel(); ++b) {
      const at::Tensor block = flat.slice(0, b * kQuantBlock, (b + 1) * kQuantBlock);
      EXPECT_EQ(q.absmax[b].item<float>(), block.abs().max().item<float>());
    }
    const at::Tensor back = dequantize_blockwise(q.codes, q.absmax, is_signed);
    const at::Tensor scale = q.absmax.repeat_interleave(kQuantBlock).slice(0, 0, in.numel());
    EXPECT_LE(((back - in).reshape({-1}).abs() / scale).max().item<double>(), 1.0 / 16);
  }
}

TEST(Blockwise8bit, TheTableTakesEveryGridPointToANeighbouringCode) {
  for (const bool is_signed : {true, false}) {
    const auto& table = quantize_table(is_signed);
    const float* code = dynamic_map(is_signed).const_data_ptr<float>();
    for (size_t k = 0; k < table.size(); ++k) {
      if (k > 0) {
        ASSERT_LE(table[k - 1], table[k]) << k;
      }
      // The grid point lies between the midpoints around its code.
      const float point = (static_cast<float>(k) + static_cast<float>(k)) / 65535.0f - 1.0f;
      const int c = table[k];
      if (c > 0) {
        ASSERT_LT(0.5f * (code[c - 1] + code[c]), point) << k;
      }
      if (c < 255) {
        ASSERT_GE(0.5f * (code[c] + code[c + 1]), point) << k;
      }
    }
  }
}

// The fused kernel's dequantisation (register tables on AVX-512, kernels/cpu/table_lookup.h)
// against the map itself, on every code, with a ragged tail.
TEST(Blockwise8bit, VectorDequantisationEqualsTheMaps) {
  for (const bool is_signed : {true, false}) {
    const float* map = dynamic_map(is_signed).const_data_ptr<float>();
    const cpu::vec::FloatMap float_map(map);
    std::vector<uint8_t> codes(256 * 3 + 5);
    for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<uint8_t>(i * 7 + i / 256);
    std::vector<float> values(codes.size());
    cpu::vec::look_up_floats(codes.data(), float_map, values.data(),
                             static_cast<int64_t>(codes.size()));
    for (size_t i = 0; i < codes.size(); ++i) ASSERT_EQ(values[i], map[codes[i]]) << i;
  }
}

#if defined(TITAN_QUANTIZE_AVX512)
// GCC 12 warns about the intrinsics' own undefined source operands (_mm512_undefined_*).
#pragma GCC diagnostic push
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// The fused kernel's 64-element step: four gathers packed into one vector (vec::pack64); the
// last n % 64 values are left as they are.
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) void quantize_by_pack64(
    const float* x, float inverse, const cpu::vec::GridTable& grid, uint8_t* out, int64_t n) {
  const __m512 scale = _mm512_set1_ps(inverse);
  for (int64_t i = 0; i + 64 <= n; i += 64) {
    __m512i gathered[4];
    for (int q = 0; q < 4; ++q)
      gathered[q] = cpu::vec::gather16(_mm512_loadu_ps(x + i + 16 * q), scale, grid);
    _mm512_storeu_si512(out + i,
                        cpu::vec::pack64(gathered[0], gathered[1], gathered[2], gathered[3]));
  }
}
#pragma GCC diagnostic pop
#endif

// The fused kernel's quantisation (grid points and a gather on AVX-512, 16 or 64 values a step,
// kernels/cpu/table_lookup.h) against bitsandbytes' per-element loop (blockwise_8bit.h), over a
// dense sweep of float32 values: every 4099th float of [-2, 2], each code's value and the midpoints
// between codes with their neighbouring floats, values on both sides of every grid point's
// boundary, zeros, +-1, beyond +-1, infinities and NaN; under three scales.
TEST(Blockwise8bit, VectorQuantisationEqualsTheLoop) {
  std::vector<float> x;
  auto around = [&](float v) {
    float lo = v, hi = v;
    x.push_back(v);
    for (int u = 0; u < 3; ++u) {
      lo = std::nextafter(lo, -INFINITY);
      hi = std::nextafter(hi, INFINITY);
      x.push_back(lo);
      x.push_back(hi);
    }
  };
  for (float v = -2.0f; v < 2.0f;) {
    x.push_back(v);
    uint32_t bits = 0;
    std::memcpy(&bits, &v, 4);
    bits = v < 0 ? bits - 4099 : bits + 4099;
    if (v < 0 && (bits & 0x80000000u) == 0) bits = 0;  // crossed -0
    std::memcpy(&v, &bits, 4);
  }
  for (const bool is_signed : {true, false}) {
    const float* code = dynamic_map(is_signed).const_data_ptr<float>();
    for (int c = 0; c < 256; ++c) {
      around(code[c]);
      if (c < 255) around(0.5f * (code[c] + code[c + 1]));
    }
  }
  for (int k = 0; k <= 65536; ++k)  // where fmaf((y + 1) * 0.5, 65535, 0.5) reaches k
    around(static_cast<float>((k - 0.5) / 65535.0 * 2.0 - 1.0));
  for (const float v :
       {0.0f, -0.0f, 1.0f, -1.0f, 1.5f, -3.0f, INFINITY, -INFINITY,
        std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::denorm_min()})
    around(v);
  for (const bool is_signed : {true, false}) {
    const auto& table = quantize_table(is_signed);
    const cpu::vec::GridTable grid(table);
    for (const float inverse : {1.0f, 1.0f / 0.37f, 1.0f / 3e-3f}) {
      std::vector<uint8_t> out(x.size());
      cpu::vec::quantize(x.data(), inverse, grid, out.data(), static_cast<int64_t>(x.size()));
      for (size_t i = 0; i < x.size(); ++i)
        ASSERT_EQ(int{out[i]}, int{table[quantize_grid_point(x[i] * inverse)]})
            << "x " << x[i] << " inverse " << inverse << " signed " << is_signed;
#if defined(TITAN_QUANTIZE_AVX512)
      if (!cpu::vec::floats64_ok()) continue;
      std::vector<uint8_t> packed(x.size());
      quantize_by_pack64(x.data(), inverse, grid, packed.data(), static_cast<int64_t>(x.size()));
      for (size_t i = 0; i < x.size() / 64 * 64; ++i)
        ASSERT_EQ(int{packed[i]}, int{out[i]})
            << "64 a step: x " << x[i] << " inverse " << inverse << " signed " << is_signed;
#endif
    }
  }
}

#if defined(TITAN_MKL_SQRT_INLINE)
// The kernel's inline square root (kernels/cpu/mkl_sqrt.h) against ATen's float32 sqrt, which
// bitsandbytes calls: every 1021st non-negative float32 bit pattern (subnormals, +inf, NaNs),
// every 5th float of [2^-79, 2^-77], around where MKL's kernel scales tiny inputs, and some
// negatives (each one left to vsSqrt through its slow error path).
TEST(AdamW8bit, InlineSquareRootEqualsAtenSqrt) {
  if (!cpu::mkl_sqrt_inline_ok()) GTEST_SKIP() << "the inline root is not used on this machine";
  std::vector<float> x;
  auto push_bits = [&](uint32_t bits) {
    float v = 0;
    std::memcpy(&v, &bits, 4);
    x.push_back(v);
  };
  for (uint32_t bits = 0; bits <= 0x7FFFFFFFu - 1021; bits += 1021) push_bits(bits);
  for (uint32_t bits = 0x80000000u; bits <= 0xFFFFFFFFu - 0x1000000u; bits += 0x1000000u)
    push_bits(bits);  // -0, negatives, -inf and negative NaNs
  for (uint32_t bits = 0x18000000u; bits <= 0x19000000u; bits += 5)
    push_bits(bits);  // 2^-79..2^-77
  const at::Tensor in = at::from_blob(x.data(), {static_cast<int64_t>(x.size())}, at::kFloat);
  const at::Tensor expected = at::sqrt(in);
  at::Tensor got = at::empty_like(in);
  cpu::mkl_sqrt_inline(x.data(), got.mutable_data_ptr<float>(), in.numel());
  // Bitwise, NaNs included.
  EXPECT_TRUE(at::equal(expected.view(at::kInt), got.view(at::kInt)));
}
#endif

}  // namespace
}  // namespace titan::kernels
