// The gradient norm: exact to float64 rounding (against ATen's float64 norm of the float64
// concatenation), for float32 and bfloat16 gradients of awkward sizes (empty, one entry, around
// the block size, rows of very different scales), the same bits at 1 and 2 threads, and the
// clip applied as torch.nn.utils.clip_grads_with_norm_ does. The layouts (FSDP, DDP, one
// process) are checked in tests/integration/test_optimizer_peer.py.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <cmath>

#include "titan/train/grad_clip.h"

namespace titan::train {
namespace {

std::vector<at::Tensor> params_with_grads(const std::vector<at::Tensor>& grads) {
  std::vector<at::Tensor> params;
  for (const at::Tensor& g : grads) {
    at::Tensor p = at::zeros(g.sizes(), g.options()).requires_grad_(true);
    p.mutable_grad() = g.clone();
    params.push_back(p);
  }
  return params;
}

// What the trainer's step does with the functions under test, on one process.
at::Tensor sum_of_squares(const std::vector<at::Tensor>& grads) {
  return total_grad_squares(params_with_grads(grads));
}
at::Tensor total_grad_norm(const std::vector<at::Tensor>& params) {
  return total_grad_squares(params).sqrt().to(at::kFloat);
}
GradNorm grad_norm(const std::vector<at::Tensor>& params, double max_norm) {
  return grad_norm_of_squares(total_grad_squares(params).reshape({1}), max_norm);
}
// torch.nn.utils.clip_grad_norm_: the norm, then the scale when the coefficient is below 1.
double clip_grad_norm(const std::vector<at::Tensor>& params, double max_norm) {
  const GradNorm n = grad_norm(params, max_norm);
  if (n.coefficient.item<float>() < 1.0f) scale_grads(params, n.coefficient);
  return n.norm.item<double>();
}

// torch.linalg.vector_norm of the float64 concatenation.
double float64_norm(const std::vector<at::Tensor>& grads) {
  std::vector<at::Tensor> flat;
  for (const at::Tensor& g : grads) flat.push_back(g.to(at::kDouble).reshape({-1}));
  return at::linalg_vector_norm(at::cat(flat), 2).item<double>();
}

std::vector<at::Tensor> awkward_grads() {
  at::manual_seed(11);
  // Rows whose scales differ by 10^6: float32 accumulation loses digits here.
  const at::Tensor scales = at::pow(10.0, at::linspace(-3, 3, 3000)).unsqueeze(1);
  return {at::randn({0}),
          at::randn({1}),
          at::randn({kSquaresBlock - 1}),
          at::randn({kSquaresBlock + 1}),
          at::randn({3, 5, 7}),
          at::randn({3000, 257}) * scales,
          (at::randn({333, 64}) * 1e-2).to(at::kBFloat16),
          at::randn({2 * kSquaresBlock})};
}

TEST(GradNorm, EqualsTheFloat64NormOfTheConcatenation) {
  const std::vector<at::Tensor> grads = awkward_grads();
  const std::vector<at::Tensor> params = params_with_grads(grads);
  const at::Tensor squares = total_grad_squares(params);
  EXPECT_EQ(squares.scalar_type(), at::kDouble);
  EXPECT_EQ(squares.dim(), 0);
  const double want = float64_norm(grads);
  EXPECT_LE(std::abs(std::sqrt(squares.item<double>()) - want), 1e-12 * want);
  // The float32 norm is the float64 one rounded.
  EXPECT_EQ(total_grad_norm(params).item<float>(), static_cast<float>(want));
}

// The case behind the float64 accumulation: a big gradient whose first rows are 100x larger,
// on which a float32 reduction is off by percents.
TEST(GradNorm, ExactOnALargeGradient) {
  at::manual_seed(0);
  at::Tensor g = at::randn({20000, 256}) * 1e-3;
  g.narrow(0, 0, 100).mul_(100);
  const double want = float64_norm({g});
  const double got = std::sqrt(sum_of_squares({g}).item<double>());
  EXPECT_LE(std::abs(got - want), 1e-12 * want);
}

TEST(GradNorm, SameBitsAtOneAndTwoThreads) {
  const std::vector<at::Tensor> grads = awkward_grads();
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  const double one = sum_of_squares(grads).item<double>();
  at::set_num_threads(2);
  const double two = sum_of_squares(grads).item<double>();
  at::set_num_threads(threads);
  EXPECT_EQ(one, two);
}

TEST(GradNorm, NoGradientsIsZero) {
  at::Tensor p = at::zeros({3}).requires_grad_(true);
  EXPECT_EQ(total_grad_squares({p}).item<double>(), 0.0);
  EXPECT_EQ(sum_of_squares({}).item<double>(), 0.0);
}

// The clip scales every gradient by min(1, max_norm / (norm + 1e-6)) in float32, as
// torch.nn.utils.clip_grads_with_norm_; under max_norm nothing changes.
TEST(GradNorm, ClipScalesByTheCoefficient) {
  const std::vector<at::Tensor> grads = {at::randn({40, 3}) * 5, at::randn({7})};
  std::vector<at::Tensor> params = params_with_grads(grads);
  const double norm = clip_grad_norm(params, 1.0);
  const float norm32 = static_cast<float>(float64_norm(grads));
  EXPECT_EQ(norm, norm32);
  const at::Tensor coef =
      at::clamp((at::scalar_tensor(norm32) + 1e-6).reciprocal() * 1.0, std::nullopt, 1.0);
  for (size_t i = 0; i < grads.size(); ++i)
    EXPECT_TRUE(at::equal(params[i].grad(), grads[i] * coef)) << i;

  std::vector<at::Tensor> small = params_with_grads({at::full({4}, 0.1)});
  const GradNorm n = grad_norm(small, 10.0);
  EXPECT_EQ(n.coefficient.item<float>(), 1.0f);
  EXPECT_EQ(clip_grad_norm(small, 10.0), static_cast<float>(0.2));
  EXPECT_TRUE(at::equal(small[0].grad(), at::full({4}, 0.1)));
  // max_norm <= 0 measures only.
  EXPECT_EQ(grad_norm(params_with_grads(grads), 0.0).coefficient.item<float>(), 1.0f);
}

}  // namespace
}  // namespace titan::train
