// DPO's reference as swapped values (train/preference/reference_weights.h): during the
// reference's forward the trained tensors hold the captured values (or zeros, adapters off),
// with no gradient recorded; afterwards the policy's values are back bit for bit, also when the
// forward throws.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <stdexcept>

#include "titan/train/preference/reference_weights.h"

namespace titan::train {
namespace {

TEST(ReferenceWeights, SwapsTheCapturedValuesInForTheForwardOnly) {
  at::Tensor w = at::randn({3, 4}).requires_grad_(true);
  const NamedTensors trained = {{"w", w}};
  ReferenceWeights reference;
  reference.capture(trained, /*adapters_off=*/false);
  const at::Tensor start = w.detach().clone();
  {
    at::NoGradGuard no_grad;
    w.add_(1.5);  // the optimizer's step
  }
  const at::Tensor policy = w.detach().clone();
  reference.with_reference([&] {
    EXPECT_TRUE(at::equal(w, start));
    EXPECT_FALSE((w * 2).requires_grad());
  });
  EXPECT_TRUE(at::equal(w, policy));
  EXPECT_THROW(reference.with_reference([] { throw std::runtime_error("forward failed"); }),
               std::runtime_error);
  EXPECT_TRUE(at::equal(w, policy));
}

TEST(ReferenceWeights, AdaptersOffAreZeros) {
  at::Tensor a = at::randn({2, 5}).requires_grad_(true);
  ReferenceWeights reference;
  reference.capture({{"lora_a", a}}, /*adapters_off=*/true);
  const at::Tensor policy = a.detach().clone();
  reference.with_reference([&] { EXPECT_TRUE(at::equal(a, at::zeros_like(a))); });
  EXPECT_TRUE(at::equal(a, policy));
}

}  // namespace
}  // namespace titan::train
