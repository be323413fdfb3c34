// The CPU kernels' GEMM (kernels/cpu/gemm.h) against a float64 at::mm: every layout the kernels
// pass (transposed operands, a narrowed output whose rows are longer than it, accumulation) and
// those left to ATen (a transposed output, an operand with no unit stride, a small product),
// an output full of NaN that must not be read, the empty and one-element edges, bfloat16
// through ATen, and the same bits at 1 and 2 threads.
#include <gtest/gtest.h>

#include <ATen/Parallel.h>

#include <limits>

#include "relative_error.h"
#include "titan/kernels/cpu/gemm.h"

namespace titan::kernels {
namespace {

using testing::relative_error;

// The float64 product of the float32 operands, and float32 at::mm's own error against it: the
// oneDNN product must be as close as MKL's (within 4x: a different summation order).
void expect_close(const at::Tensor& got, const at::Tensor& a, const at::Tensor& b,
                  const at::Tensor& plus = at::Tensor()) {
  at::Tensor exact = at::mm(a.to(at::kDouble), b.to(at::kDouble));
  at::Tensor aten = at::mm(a, b);
  if (plus.defined()) {
    exact = exact + plus.to(at::kDouble);
    aten = aten + plus;
  }
  const double bound = std::max(4 * relative_error(aten, exact), 1e-6);
  EXPECT_LE(relative_error(got, exact), bound) << a.sizes() << " @ " << b.sizes();
}

TEST(CpuGemm, EqualsFloat64ProductForEveryLayout) {
  ASSERT_TRUE(cpu::gemm_uses_onednn());  // the torch wheel has oneDNN: this tests its path
  at::manual_seed(3);
  const at::Tensor x = at::randn({67, 96}), w = at::randn({131, 96}), g = at::randn({67, 131});
  // y = x w^T (a transposed right operand), dx = g w, dw = g^T x (a transposed left one).
  at::Tensor y = at::empty({67, 131}), dx = at::empty({67, 96}), dw = at::empty({131, 96});
  EXPECT_TRUE(cpu::gemm_runs_on_onednn(x, w.t(), y));
  EXPECT_TRUE(cpu::gemm_runs_on_onednn(g, w, dx));
  EXPECT_TRUE(cpu::gemm_runs_on_onednn(g.t(), x, dw));
  cpu::gemm_out(x, w.t(), y);
  cpu::gemm_out(g, w, dx);
  cpu::gemm_out(g.t(), x, dw);
  expect_close(y, x, w.t());
  expect_close(dx, g, w);
  expect_close(dw, g.t(), x);
  // Into columns 5..135 of a wider buffer: rows of 150 elements, 131 of them written.
  at::Tensor wide = at::full({67, 150}, 7.0f);
  EXPECT_TRUE(cpu::gemm_runs_on_onednn(x, w.t(), wide.narrow(1, 5, 131)));
  cpu::gemm_out(x, w.t(), wide.narrow(1, 5, 131));
  expect_close(wide.narrow(1, 5, 131), x, w.t());
  EXPECT_TRUE(at::equal(wide.narrow(1, 0, 5), at::full({67, 5}, 7.0f)));
  EXPECT_TRUE(at::equal(wide.narrow(1, 136, 14), at::full({67, 14}, 7.0f)));
  EXPECT_TRUE(cpu::gemm(x, w.t()).is_contiguous());
  expect_close(cpu::gemm(x, w.t()), x, w.t());
}

// A transposed output, an operand with no unit stride and a small product: ATen's at::mm.
TEST(CpuGemm, LeavesOtherLayoutsAndSmallProductsToATen) {
  at::manual_seed(8);
  const at::Tensor x = at::randn({67, 96}), w = at::randn({131, 96});
  at::Tensor yt = at::empty({131, 67});
  EXPECT_FALSE(cpu::gemm_runs_on_onednn(x, w.t(), yt.t()));
  cpu::gemm_out(x, w.t(), yt.t());
  expect_close(yt.t(), x, w.t());
  const at::Tensor every_other = at::randn({67, 192}).slice(1, 0, 192, 2);  // strides (192, 2)
  EXPECT_FALSE(cpu::gemm_runs_on_onednn(every_other, w.t(), at::empty({67, 131})));
  expect_close(cpu::gemm(every_other, w.t()), every_other, w.t());
  const at::Tensor row = at::randn({1, 96}), square = at::randn({96, 96});
  EXPECT_FALSE(cpu::gemm_runs_on_onednn(row, square, at::empty({1, 96})));
  expect_close(cpu::gemm(row, square), row, square);
}

TEST(CpuGemm, AccumulatesOrIgnoresWhatTheOutputHeld) {
  at::manual_seed(4);
  const at::Tensor a = at::randn({32, 300}), b = at::randn({300, 48}), c = at::randn({32, 48});
  at::Tensor acc = c.clone();
  EXPECT_TRUE(cpu::gemm_runs_on_onednn(a, b, acc));
  cpu::gemm_out(a, b, acc, /*accumulate=*/true);
  expect_close(acc, a, b, c);
  at::Tensor nan = at::full({32, 48}, std::numeric_limits<float>::quiet_NaN());
  cpu::gemm_out(a, b, nan);
  EXPECT_FALSE(nan.isnan().any().item<bool>());
  expect_close(nan, a, b);
}

TEST(CpuGemm, HandlesEdgeShapes) {
  at::manual_seed(5);
  for (const auto& [m, k, n] :
       {std::array<int64_t, 3>{1, 7, 1}, {1, 1, 9}, {5, 1, 1}, std::array<int64_t, 3>{1, 151, 3}}) {
    const at::Tensor a = at::randn({m, k}), b = at::randn({k, n});
    expect_close(cpu::gemm(a, b), a, b);
  }
  // An empty inner dimension: the product is zero, or leaves an accumulator as it was.
  at::Tensor out = at::full({3, 4}, 2.0f);
  cpu::gemm_out(at::empty({3, 0}), at::empty({0, 4}), out);
  EXPECT_TRUE(at::equal(out, at::zeros({3, 4})));
  out.fill_(2.0f);
  cpu::gemm_out(at::empty({3, 0}), at::empty({0, 4}), out, /*accumulate=*/true);
  EXPECT_TRUE(at::equal(out, at::full({3, 4}, 2.0f)));
  cpu::gemm_out(at::empty({0, 5}), at::empty({5, 4}), at::empty({0, 4}));  // nothing to do
}

TEST(CpuGemm, BFloat16GoesThroughATen) {
  at::manual_seed(6);
  const at::Tensor a = at::randn({8, 64}).to(at::kBFloat16),
                   b = at::randn({64, 12}).to(at::kBFloat16);
  EXPECT_TRUE(at::equal(cpu::gemm(a, b), at::mm(a, b)));
}

TEST(CpuGemm, RejectsMismatchedShapesAndDtypes) {
  EXPECT_THROW(cpu::gemm(at::randn({2, 3}), at::randn({4, 5})), c10::Error);
  EXPECT_THROW(cpu::gemm_out(at::randn({2, 3}), at::randn({3, 5}), at::empty({2, 4})), c10::Error);
  EXPECT_THROW(cpu::gemm(at::randn({2, 3}), at::randn({3, 5}).to(at::kDouble)), c10::Error);
}

// The head's shapes at a small vocabulary: the same bits whatever the thread count.
TEST(CpuGemm, SameBitsAtOneAndTwoThreads) {
  at::manual_seed(7);
  const at::Tensor h = at::randn({64, 32}), w = at::randn({5003, 32}), g = at::randn({64, 5003});
  EXPECT_TRUE(cpu::gemm_runs_on_onednn(g.t(), h, at::empty({5003, 32})));
  const int threads = at::get_num_threads();
  at::Tensor r[2][3];
  for (int t : {1, 2}) {
    at::set_num_threads(t);
    r[t - 1][0] = cpu::gemm(h, w.t());
    r[t - 1][1] = cpu::gemm(g, w);
    r[t - 1][2] = cpu::gemm(g.t(), h);
  }
  at::set_num_threads(threads);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(at::equal(r[0][i], r[1][i])) << i;
}

}  // namespace
}  // namespace titan::kernels
