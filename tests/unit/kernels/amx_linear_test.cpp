// The AMX projection under bfloat16 compute on float32 master weights (kernels/cpu/amx_linear.h)
// against the exact products of the same bfloat16 operands (float64): y and dx within one
// bfloat16 rounding, dW (float32) within float32 summation error; for token counts that are not
// multiples of the tiles' 16 and 32, one and several strips and chunks, the same bits at 1 and 2
// threads; and kernels::linear taking the float32 weight of a bfloat16 input through it (and
// casting it where the AMX kernels do not apply). Skipped on CPUs without AMX.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <cmath>

#include "titan/kernels/cpu/amx_linear.h"
#include "titan/kernels/linear.h"

namespace titan::kernels {
namespace {

// Largest amount by which |got - exact| exceeds `relative` * |exact| + `absolute` (<= 0: within).
double excess(const at::Tensor& got, const at::Tensor& exact, double relative,
              const at::Tensor& absolute) {
  return ((got.to(at::kDouble) - exact).abs() - exact.abs() * relative - absolute)
      .max()
      .item<double>();
}

TEST(AmxLinear, ProductsWithinOneRoundingOfTheExactOnes) {
  if (!cpu::amx_linear_supports(at::zeros({1, 64}, at::kBFloat16), at::zeros({64, 64})))
    GTEST_SKIP() << "no AMX on this CPU";
  at::manual_seed(4);
  const int threads = at::get_num_threads();
  const double bf16 = std::ldexp(1.0, -8);
  for (const auto& [out, in] :
       std::vector<std::pair<int64_t, int64_t>>{{64, 64}, {192, 128}, {128, 320}, {576, 64}}) {
    const at::Tensor w = at::randn({out, in}) * 0.1;
    const at::Tensor w_exact = w.to(at::kBFloat16).to(at::kDouble);  // as the kernels round it
    for (const int64_t tokens : {1, 5, 33, 70}) {
      SCOPED_TRACE(std::to_string(out) + " x " + std::to_string(in) + ", " +
                   std::to_string(tokens) + " tokens");
      const at::Tensor x0 = at::randn({tokens, in}).to(at::kBFloat16);
      const at::Tensor dy = at::randn({tokens, out}).to(at::kBFloat16);
      const at::Tensor x = x0.clone().requires_grad_(true);
      const at::Tensor weight = w.clone().requires_grad_(true);
      const at::Tensor y = cpu::amx_linear(x, weight);
      y.backward(dy);
      ASSERT_EQ(y.scalar_type(), at::kBFloat16);
      ASSERT_EQ(x.grad().scalar_type(), at::kBFloat16);
      ASSERT_EQ(weight.grad().scalar_type(), at::kFloat);
      const at::Tensor x64 = x0.to(at::kDouble), dy64 = dy.to(at::kDouble);
      const at::Tensor zero = at::zeros({}, at::kDouble);
      EXPECT_LE(excess(y, at::matmul(x64, w_exact.t()), bf16, zero + 1e-6), 0.0);
      EXPECT_LE(excess(x.grad(), at::matmul(dy64, w_exact), bf16, zero + 1e-6), 0.0);
      // dW: exact products of bfloat16 values summed in float32 over the tokens.
      const at::Tensor bound =
          at::matmul(dy64.abs().t(), x64.abs()) * (tokens + 2) * std::ldexp(1.0, -24);
      EXPECT_LE(excess(weight.grad(), at::matmul(dy64.t(), x64), 0.0, bound), 0.0);
      // The same bits at another thread count, and accumulation adds to what is there.
      at::set_num_threads(threads == 1 ? 2 : 1);
      EXPECT_TRUE(at::equal(cpu::amx_mixed_forward(x0, w), y.detach()));
      EXPECT_TRUE(at::equal(cpu::amx_mixed_backward(dy, w), x.grad()));
      at::Tensor dw = at::ones({out, in});
      cpu::amx_weight_grad(dy, x0, dw, /*accumulate=*/true);
      at::set_num_threads(threads);
      EXPECT_LE((dw - 1 - weight.grad()).abs().max().item<double>(),
                1e-6 * (1 + weight.grad().abs().max().item<double>()));
    }
  }
}

// kernels::linear of a bfloat16 input and a float32 weight: the AMX kernels where they apply (the
// weight's gradient then float32, not rounded to bfloat16), the weight cast to bfloat16 and
// at::linear elsewhere; both close to at::linear of the cast weight.
TEST(AmxLinear, LinearTakesTheFloat32MasterWeight) {
  at::manual_seed(5);
  for (const int64_t in : {64, 40}) {
    SCOPED_TRACE(std::to_string(in) + " inputs");
    const at::Tensor x0 = at::randn({2, 9, in}).to(at::kBFloat16);
    const at::Tensor w0 = at::randn({128, in}) * 0.1;
    const at::Tensor b0 = at::randn({128});
    const at::Tensor probe = at::randn({2, 9, 128}).to(at::kBFloat16);
    auto run = [&](bool cast_first) {
      const at::Tensor x = x0.clone().requires_grad_(true);
      const at::Tensor w = w0.clone().requires_grad_(true);
      const at::Tensor y = cast_first ? at::linear(x, w.to(at::kBFloat16), b0.to(at::kBFloat16))
                                      : kernels::linear(x, w, b0);
      y.backward(probe);
      return std::make_tuple(y.detach(), x.grad(), w.grad());
    };
    const auto [y, dx, dw] = run(false);
    const auto [y_ref, dx_ref, dw_ref] = run(true);
    EXPECT_EQ(y.scalar_type(), at::kBFloat16);
    EXPECT_EQ(dw.scalar_type(), at::kFloat);
    auto rel = [](const at::Tensor& a, const at::Tensor& b) {
      return ((a.to(at::kDouble) - b.to(at::kDouble)).abs().max() / b.to(at::kDouble).abs().max())
          .item<double>();
    };
    EXPECT_LE(rel(y, y_ref), 1e-2);
    EXPECT_LE(rel(dx, dx_ref), 1e-2);
    EXPECT_LE(rel(dw, dw_ref), 1e-2);
  }
}

}  // namespace
}  // namespace titan::kernels
