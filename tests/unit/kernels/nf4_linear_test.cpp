// nf4_linear (kernels/nf4.h, ops.h): the fused, tiled kernel against reference (the whole
// weight dequantised, one linear), forward and backward, with a weight of several tiles and a
// row count that leaves a short last tile; and the kernel never differentiates the weight.
#include <gtest/gtest.h>

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
  const int64_t cols = 1000;
  // Three tiles, the last one short.
  const int64_t rows = 2 * (kNf4TileElements / cols) + 37;
  Nf4Weight w = quantize_nf4(at::randn({rows, cols}) * 0.05);
  w.packed = w.packed.to(device);
  w.absmax = w.absmax.to(device);
  ASSERT_GT(rows, 2 * nf4_tile_rows(w));
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    SCOPED_TRACE(c10::toString(dtype));
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

}  // namespace
}  // namespace titan::kernels
