// The fused AdamW8bit kernel against the reference (bitsandbytes' sequence of ATen ops over
// whole tensors, kernels/adamw8bit.h) on ragged tails, blocks of zeros, bfloat16 parameters
// and any number of threads; the bits against bitsandbytes itself are checked in
// tests/integration/test_adamw8bit_peer.py.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <tuple>
#include <vector>

#include "titan/kernels/adamw8bit.h"
#include "titan/kernels/blockwise_8bit.h"
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

// The fused kernel's look-ups (register tables on AVX-512, kernels/cpu/table_lookup.h) against
// the tables themselves, on every code and every grid point, with a ragged tail.
TEST(Blockwise8bit, VectorLookUpsEqualTheTables) {
  for (const bool is_signed : {true, false}) {
    const float* map = dynamic_map(is_signed).const_data_ptr<float>();
    const cpu::vec::FloatMap float_map(map);
    std::vector<uint8_t> codes(256 * 3 + 5);
    for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<uint8_t>(i * 7 + i / 256);
    std::vector<float> values(codes.size());
    cpu::vec::look_up_floats(codes.data(), float_map, values.data(),
                             static_cast<int64_t>(codes.size()));
    for (size_t i = 0; i < codes.size(); ++i) ASSERT_EQ(values[i], map[codes[i]]) << i;

    const auto& table = quantize_table(is_signed);
    const cpu::vec::StepTable steps(table);
    std::vector<uint16_t> points(65536 + 7);
    for (size_t k = 0; k < points.size(); ++k) points[k] = static_cast<uint16_t>(k * 40503u);
    std::vector<uint8_t> out(points.size());
    cpu::vec::look_up_steps(points.data(), steps, out.data(), static_cast<int64_t>(points.size()));
    for (size_t k = 0; k < points.size(); ++k) ASSERT_EQ(out[k], table[points[k]]) << points[k];
  }
}

}  // namespace
}  // namespace titan::kernels
