// nf4_linear (kernels/nf4.h, ops.h): the fused kernel against reference (the whole weight
// dequantised, one linear), forward and backward, with a weight of several tiles and a row count
// that leaves a short last tile, and a weight the AMX kernels take (where the CPU has AMX); and
// the kernel never differentiates the weight. The AMX kernels against the exact product, and
// the CPU dequantisation against the format's definition.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include "titan/kernels/cpu/nf4_amx.h"
#include "titan/kernels/nf4.h"
#include "titan/kernels/nf4_matmul.h"
#include "titan/kernels/registry.h"

namespace titan::kernels {
namespace {

Nf4LinearFn implementation(const std::string& name) {
  return std::get<static_cast<size_t>(Op::kNf4Linear)>(
      kernel_registry().get(Op::kNf4Linear, name).fn);
}

class Nf4Linear : public ::testing::TestWithParam<at::DeviceType> {};

TEST_P(Nf4Linear, FusedEqualsReferenceForwardAndBackward) {
  if (GetParam() == at::kCUDA && !at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  const at::Device device(GetParam());
  at::manual_seed(0);
  // Three tiles, the last one short; and sides that are multiples of 64 (the AMX kernels', on
  // the CPU in bfloat16 where the CPU has AMX).
  for (const auto& [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{
           {2 * (kNf4TileElements / 1000) + 37, 1000}, {192, 256}}) {
    Nf4Weight w = quantize_nf4(at::randn({rows, cols}) * 0.05);
    w.packed = w.packed.to(device);
    w.absmax = w.absmax.to(device);
    if (cols == 1000) {
      ASSERT_GT(rows, 2 * nf4_tile_rows(w));
    }
    for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
      SCOPED_TRACE(std::to_string(cols) + " columns, " + c10::toString(dtype));
      const at::Tensor x0 = at::randn({2, 3, cols}, at::TensorOptions(device).dtype(dtype));
      const at::Tensor probe = at::randn({2, 3, rows}, at::TensorOptions(device).dtype(dtype));
      auto run = [&](const std::string& name) {
        const at::Tensor x = x0.detach().clone().requires_grad_(true);
        const at::Tensor y = implementation(name)(x, w);
        (y.to(at::kFloat) * probe.to(at::kFloat)).sum().backward();
        return std::make_pair(y.detach(), x.grad());
      };
      const auto [y_ref, dx_ref] = run("reference");
      const auto [y, dx] = run("fused");
      ASSERT_EQ(y.sizes(), (std::vector<int64_t>{2, 3, rows}));
      EXPECT_EQ(y.scalar_type(), dtype);
      const double tol = dtype == at::kFloat ? 1e-5 : 2e-2;
      auto err = [](const at::Tensor& a, const at::Tensor& b) {
        const at::Tensor a64 = a.to(at::kCPU, at::kDouble), b64 = b.to(at::kCPU, at::kDouble);
        return ((a64 - b64).abs().max() / b64.abs().max()).item<double>();
      };
      EXPECT_LE(err(y, y_ref), tol);
      EXPECT_LE(err(dx, dx_ref), tol);
      // And both are x @ W^T of the dequantised weight.
      const at::Tensor expected =
          at::matmul(x0.to(at::kFloat).cpu(), dequantize_nf4(w, at::kFloat).cpu().t());
      EXPECT_LE(err(y_ref.to(at::kFloat), expected), dtype == at::kFloat ? 1e-5 : 2e-2);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, Nf4Linear, ::testing::Values(at::kCPU, at::kCUDA),
                         [](const auto& info) { return c10::DeviceTypeName(info.param, true); });

TEST(Nf4Format, ScalesAndCodesRoundTripThroughDoubleQuantisation) {
  at::manual_seed(1);
  const Nf4Weight w = quantize_nf4(at::randn({300, 70}));
  const QuantizedScales s = quantize_scales(w.absmax);
  EXPECT_EQ(s.count(), w.absmax.numel());
  EXPECT_EQ(s.absmax.numel(), (w.absmax.numel() + 255) / 256);
  // 8-bit dynamic codes of scales around their mean: within a few percent of each scale.
  const at::Tensor back = dequantize_scales(s);
  EXPECT_LE(((back - w.absmax).abs() / w.absmax).max().item<double>(), 0.05);
  EXPECT_EQ(dynamic_map().numel(), 256);
  EXPECT_TRUE(at::equal(dynamic_map(), std::get<0>(dynamic_map().sort())));
}

// The per-element definition (nf4.h), written with ATen ops: element e is code[nibble e] *
// absmax[e / 64] in float32, then rounded to the dtype.
at::Tensor dequantised_by_definition(const Nf4Weight& w, at::ScalarType dtype) {
  const at::Tensor bytes = w.packed.to(at::kLong);
  const at::Tensor nibbles = at::stack({bytes.bitwise_right_shift(4), bytes.bitwise_and(15)}, 1)
                                 .reshape({-1})
                                 .narrow(0, 0, w.rows * w.cols);
  const at::Tensor code = at::tensor(std::vector<float>(nf4_code().begin(), nf4_code().end()));
  const at::Tensor scale = w.absmax.repeat_interleave(w.blocksize).narrow(0, 0, w.rows * w.cols);
  return (code.index_select(0, nibbles) * scale).to(dtype).reshape({w.rows, w.cols});
}

// The CPU dequantisation (vectorised on AVX-512 for whole blocks) equals the definition bit for
// bit, for row ranges that start and end inside a block, and columns that are no multiple of 64.
TEST(Nf4Format, DequantisedRowsEqualTheDefinition) {
  at::manual_seed(2);
  for (const int64_t cols : {64, 96, 1000, 37}) {
    const int64_t rows = 41;
    at::Tensor dense = at::randn({rows, cols}) * 0.05;
    dense[3].zero_();  // a block of zeros: its absmax is 0
    const Nf4Weight w = quantize_nf4(dense);
    for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
      SCOPED_TRACE(std::to_string(cols) + " columns, " + c10::toString(dtype));
      const at::Tensor expected = dequantised_by_definition(w, dtype);
      EXPECT_TRUE(at::equal(dequantize_nf4(w, dtype), expected));
      for (const auto& [begin, n] :
           std::vector<std::pair<int64_t, int64_t>>{{0, rows}, {1, 7}, {5, 36}, {40, 1}}) {
        at::Tensor out = at::empty({n, cols}, at::TensorOptions(dtype));
        dequantize_nf4_rows_cpu(w, begin, out);
        EXPECT_TRUE(at::equal(out, expected.narrow(0, begin, n))) << "rows from " << begin;
      }
    }
  }
}

// The AMX kernels: y = x W^T and dx = dy W in bfloat16, each output the float32 sum rounded
// once, so within one bfloat16 rounding (2^-8 relative) of the exact product of the same
// bfloat16 operands; for token counts that are not multiples of the tiles' 16 and 32, weights of
// one and of several 64-row strips and of several backward chunks (512 rows, 256 columns), the
// same bits at 1 and 2 threads and with the forward's columns in chunks.
TEST(Nf4Amx, ProductsWithinOneRoundingOfTheExactOnes) {
  if (!cpu::nf4_amx_available()) GTEST_SKIP() << "no AMX on this CPU";
  at::manual_seed(3);
  const int threads = at::get_num_threads();
  for (const auto& [rows, cols] :
       std::vector<std::pair<int64_t, int64_t>>{{64, 64}, {192, 256}, {128, 640}, {576, 192}}) {
    const Nf4Weight w = quantize_nf4(at::randn({rows, cols}) * 0.05);
    ASSERT_TRUE(cpu::nf4_amx_supports(w, at::kBFloat16));
    // The weight as the kernels multiply it: dequantised to bfloat16.
    const at::Tensor dense = dequantize_nf4(w, at::kBFloat16).to(at::kDouble);
    for (const int64_t tokens : {1, 6, 32, 70}) {
      SCOPED_TRACE(std::to_string(rows) + " x " + std::to_string(cols) + ", " +
                   std::to_string(tokens) + " tokens");
      const at::Tensor x = at::randn({tokens, cols}).to(at::kBFloat16);
      const at::Tensor dy = at::randn({tokens, rows}).to(at::kBFloat16);
      const at::Tensor y = cpu::nf4_amx_forward(x, w);
      const at::Tensor dx = cpu::nf4_amx_backward(dy, w);
      ASSERT_EQ(y.sizes(), (std::vector<int64_t>{tokens, rows}));
      ASSERT_EQ(dx.sizes(), (std::vector<int64_t>{tokens, cols}));
      for (const auto& [got, exact] : {std::pair{y, at::matmul(x.to(at::kDouble), dense.t())},
                                       std::pair{dx, at::matmul(dy.to(at::kDouble), dense)}}) {
        const at::Tensor excess = (got.to(at::kDouble) - exact).abs() -
                                  exact.abs() * std::ldexp(1.0, -8) - 1e-6 * exact.abs().max();
        EXPECT_LE(excess.max().item<double>(), 0.0);
      }
      at::set_num_threads(threads == 1 ? 2 : 1);
      EXPECT_TRUE(at::equal(cpu::nf4_amx_forward(x, w), y));
      // The columns summed in chunks of 64 and 128: the same float32 sums, in the same order.
      EXPECT_TRUE(at::equal(cpu::nf4_amx_forward(x, w, 64), y));
      EXPECT_TRUE(at::equal(cpu::nf4_amx_forward(x, w, 128), y));
      EXPECT_TRUE(at::equal(cpu::nf4_amx_backward(dy, w), dx));
      at::set_num_threads(threads);
    }
  }
}

}  // namespace
}  // namespace titan::kernels
