// kernels::linear against at::linear in float64: the output and the gradients of input, weight
// and bias for a [B, S, in] input, a frozen weight (no weight gradient computed), and bfloat16
// (at::linear itself).
#include <gtest/gtest.h>

#include "relative_error.h"
#include "titan/kernels/linear.h"

namespace titan::kernels {
namespace {

using testing::relative_error;

struct Grads {
  at::Tensor y, dx, dw, db;
};

template <typename Fn>
Grads run(Fn fn, const at::Tensor& x0, const at::Tensor& w0, const at::Tensor& b0, bool train_w) {
  at::Tensor x = x0.clone().requires_grad_(true), w = w0.clone().requires_grad_(train_w),
             b = b0.clone().requires_grad_(true);
  at::Tensor y = fn(x, w, b);
  at::manual_seed(11);
  (y * at::randn(y.sizes()).to(y.scalar_type())).sum().backward();  // the same in both dtypes
  return {y.detach(), x.grad(), w.grad(), b.grad()};
}

TEST(Linear, EqualsFloat64LinearForwardAndBackward) {
  at::manual_seed(1);
  const at::Tensor x = at::randn({3, 17, 40}), w = at::randn({24, 40}), b = at::randn({24});
  for (const bool train_w : {true, false}) {
    const Grads got =
        run([](auto& x, auto& w, auto& b) { return kernels::linear(x, w, b); }, x, w, b, train_w);
    const Grads exact = run([](auto& x, auto& w, auto& b) { return at::linear(x, w, b); },
                            x.to(at::kDouble), w.to(at::kDouble), b.to(at::kDouble), train_w);
    EXPECT_EQ(got.y.sizes(), exact.y.sizes());
    EXPECT_LE(relative_error(got.y, exact.y), 1e-6);
    EXPECT_LE(relative_error(got.dx, exact.dx), 1e-6);
    EXPECT_LE(relative_error(got.db, exact.db), 1e-6);
    EXPECT_EQ(got.dw.defined(), train_w);
    if (train_w) {
      EXPECT_LE(relative_error(got.dw, exact.dw), 1e-6);
    }
  }
}

TEST(Linear, BFloat16IsATensLinear) {
  at::manual_seed(2);
  const at::Tensor x = at::randn({5, 32}).to(at::kBFloat16),
                   w = at::randn({8, 32}).to(at::kBFloat16);
  EXPECT_TRUE(at::equal(kernels::linear(x, w), at::linear(x, w)));
}

TEST(Linear, RejectsAMismatchedWeight) {
  EXPECT_THROW(kernels::linear(at::randn({2, 3}), at::randn({4, 5})), c10::Error);
}

}  // namespace
}  // namespace titan::kernels
