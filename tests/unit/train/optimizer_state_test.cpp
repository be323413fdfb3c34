// Optimizer state round trips and the errors of a bad resume; the numerics are checked
// against torch.optim.AdamW in tests/integration/test_optimizer_peer.py.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "titan/common/error.h"
#include "titan/train/optimizer.h"

namespace titan::train {
namespace {

NamedTensors make_params() {
  return {{"w", at::ones({3, 2}).requires_grad_(true)},
          {"norm.weight", at::ones({2}).requires_grad_(true)}};
}

void set_grads(NamedTensors& params, double value) {
  for (auto& [name, p] : params) p.mutable_grad() = at::full_like(p, value);
}

void expect_error_containing(const std::function<void()>& fn, const std::string& needle) {
  try {
    fn();
    FAIL() << "no error; expected one containing '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(OptimizerState, ZeroGradDropsGradientsAndStepSkipsThem) {
  NamedTensors params = make_params();
  AdamW opt(params, config::OptimizerConfig{});
  set_grads(params, 0.5);
  opt.zero_grad();
  for (auto& [name, p] : params) EXPECT_FALSE(p.grad().defined()) << name;
  const at::Tensor before = params[0].second.clone();
  opt.step(1e-2);  // no gradients: nothing changes, no state is created
  EXPECT_TRUE(at::equal(before, params[0].second));
  EXPECT_TRUE(opt.state().empty());
}

TEST(OptimizerState, ResumeFromSavedStateContinuesIdentically) {
  for (const std::string impl : {"fused", "foreach", "for-loop"}) {
    config::OptimizerConfig cfg;
    cfg.implementation = impl;
    NamedTensors a = make_params();
    AdamW opt_a(a, cfg);
    set_grads(a, 0.3);
    opt_a.step(1e-2);

    // A second optimizer over copies, restored from the first one's state.
    NamedTensors b;
    for (auto& [name, p] : a) b.emplace_back(name, p.detach().clone().requires_grad_(true));
    AdamW opt_b(b, cfg);
    NamedTensors saved;
    for (auto& [key, t] : opt_a.state()) saved.emplace_back(key, t.clone());
    opt_b.load_state(saved);

    set_grads(a, -0.2);
    set_grads(b, -0.2);
    opt_a.step(5e-3);
    opt_b.step(5e-3);
    for (size_t i = 0; i < a.size(); ++i)
      EXPECT_TRUE(at::equal(a[i].second, b[i].second)) << impl << " " << a[i].first;
    EXPECT_EQ(opt_b.state().size(), 6u);
  }
}

TEST(OptimizerState, BadStateNamesTheTensor) {
  NamedTensors params = make_params();
  AdamW opt(params, config::OptimizerConfig{});
  const at::Tensor step = at::ones({}, at::kFloat);
  expect_error_containing(
      [&] {
        opt.load_state({{"w.exp_avg", at::zeros({2, 3})},
                        {"w.exp_avg_sq", at::zeros({3, 2})},
                        {"w.step", step}});
      },
      "'w.exp_avg' has shape [2, 3] but the parameter has [3, 2]");
  expect_error_containing(
      [&] {
        opt.load_state({{"v.exp_avg", at::zeros({3, 2})}});
      },
      "'v.exp_avg' names no parameter");
  expect_error_containing(
      [&] {
        opt.load_state({{"w.momentum", at::zeros({3, 2})}});
      },
      "unknown tensor 'w.momentum'");
  expect_error_containing(
      [&] {
        opt.load_state({{"w.exp_avg", at::zeros({3, 2})}});
      },
      "'w.exp_avg_sq' is missing");
}

TEST(OptimizerState, BadConfigNamesTheKey) {
  config::OptimizerConfig cfg;
  cfg.betas = {0.9};
  expect_error_containing([&] { AdamW(make_params(), cfg); }, "optimizer.betas");
  cfg = {};
  cfg.name = "Lion";
  expect_error_containing([&] { AdamW(make_params(), cfg); }, "optimizer.name = \"Lion\"");
}

}  // namespace
}  // namespace titan::train
