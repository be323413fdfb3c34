// Activation checkpointing applied from outside, as wrappers of the blocks (the model spec's
// parallelize step): every mode gives the plain model's loss and gradients bit for bit, dense
// and MoE with the auxiliary loss; the recomputation really happens; and wrappers can run code
// around a block and swap the tensors in its parameter slots (what FSDP needs).
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <atomic>

#include "titan/common/error.h"
#include "titan/kernels/override_resolver.h"
#include "titan/kernels/reference/reference.h"
#include "titan/models/common/activation_checkpoint.h"
#include "titan/models/model_spec.h"
#include "titan/models/qwen3/model.h"

namespace titan::models {
namespace {

Qwen3Args small_model(bool moe) {
  Qwen3Args a;
  a.model_type = moe ? "qwen3_moe" : "qwen3";
  a.vocab_size = 101;
  a.hidden_size = 32;
  a.intermediate_size = 40;
  a.num_hidden_layers = 4;
  a.num_attention_heads = 4;
  a.num_key_value_heads = 2;
  a.head_dim = 8;
  if (moe) {
    a.num_experts = 4;
    a.num_experts_per_tok = 2;
    a.moe_intermediate_size = 16;
  }
  return a;
}

std::unique_ptr<Qwen3Model> build(bool moe, kernels::OverrideResolver* overrides = nullptr) {
  BuildOptions build;
  build.seed = 3;
  build.overrides = overrides;
  Qwen3Options options;
  if (moe) options.balancing = MoeBalancing::kAuxLoss;  // the aux loss must survive recompute
  return std::make_unique<Qwen3Model>(small_model(moe), options, build);
}

config::ActivationCheckpointConfig ac(const std::string& mode, const std::string& option = "2") {
  config::ActivationCheckpointConfig c;
  c.mode = mode;
  c.selective_ac_option = option;
  return c;
}

at::Tensor some_ids() { return at::arange(24, at::kLong).remainder(101).view({2, 12}); }

// Loss (with the aux loss) and every gradient after one backward.
std::vector<at::Tensor> loss_and_grads(Qwen3Model& model) {
  const ModelOutput out = model.forward(some_ids());
  at::Tensor loss = at::linear(out.hidden, model.output_weight()).logsumexp(-1).mean();
  if (out.extra_loss.defined()) loss = loss + out.extra_loss;
  loss.backward();
  std::vector<at::Tensor> result{loss.detach()};
  for (auto& [name, p] : model.named_parameters()) {
    EXPECT_TRUE(p.grad().defined()) << name;
    result.push_back(p.grad().clone());
  }
  return result;
}

TEST(ActivationCheckpoint, EveryModeGivesThePlainModelsLossAndGradients) {
  for (bool moe : {false, true}) {
    auto plain_model = build(moe);
    const auto plain = loss_and_grads(*plain_model);
    const std::vector<config::ActivationCheckpointConfig> modes = {
        ac("full"), ac("selective", "1"), ac("selective", "2"), ac("selective", "3"),
        ac("selective", "op")};
    for (const auto& mode : modes) {
      auto model = build(moe);
      apply_activation_checkpointing(model->blocks(), mode);
      const auto recomputed = loss_and_grads(*model);
      ASSERT_EQ(plain.size(), recomputed.size());
      for (size_t i = 0; i < plain.size(); ++i) {
        EXPECT_TRUE(at::equal(plain[i], recomputed[i]))
            << "moe=" << moe << " " << mode.mode << "/" << mode.selective_ac_option << " tensor "
            << i;
      }
    }
  }
}

TEST(ActivationCheckpoint, SelectiveWrapsEveryNthBlockAsTorchtitanCounts) {
  auto model = build(false);
  apply_activation_checkpointing(model->blocks(), ac("selective", "2"));
  std::vector<size_t> wrapped;
  for (Module* b : model->blocks()) wrapped.push_back(b->num_wrappers());
  EXPECT_EQ(wrapped, (std::vector<size_t>{0, 1, 0, 1}));
  auto none = build(false);
  apply_activation_checkpointing(none->blocks(), ac("none"));
  for (Module* b : none->blocks()) EXPECT_EQ(b->num_wrappers(), 0u);
}

TEST(ActivationCheckpoint, BadModeOrOptionIsAnErrorNamingTheKey) {
  auto model = build(false);
  try {
    apply_activation_checkpointing(model->blocks(), ac("sometimes"));
    FAIL() << "no error";
  } catch (const titan::Error& e) {
    EXPECT_NE(std::string(e.what()).find("activation_checkpoint.mode"), std::string::npos);
  }
  try {
    apply_activation_checkpointing(model->blocks(), ac("selective", "0"));
    FAIL() << "no error";
  } catch (const titan::Error& e) {
    EXPECT_NE(std::string(e.what()).find("selective_ac_option"), std::string::npos);
  }
}

TEST(ActivationCheckpoint, FullRecomputesEachBlockInBackward) {
  auto model = build(true);
  int inner_calls = 0, outer_calls = 0;
  for (Module* b : model->blocks()) b->add_forward_hooks([&](Module&) { ++inner_calls; }, {});
  apply_activation_checkpointing(model->blocks(), ac("full"));
  for (Module* b : model->blocks()) b->add_forward_hooks([&](Module&) { ++outer_calls; }, {});
  loss_and_grads(*model);
  EXPECT_EQ(outer_calls, 4);      // once per block
  EXPECT_EQ(inner_calls, 2 * 4);  // once more in backward

  // Outside grad mode nothing is recomputed (and nothing fails).
  inner_calls = outer_calls = 0;
  at::NoGradGuard no_grad;
  model->forward(some_ids());
  EXPECT_EQ(inner_calls, 4);
}

std::atomic<int> norm_calls{0};
at::Tensor counted_rms_norm(const at::Tensor& x, const at::Tensor& w, double eps) {
  ++norm_calls;
  return kernels::reference::rms_norm(x, w, eps);
}

TEST(ActivationCheckpoint, OpLevelRecomputesTheNormsButNotTheBlock) {
  if (!kernels::kernel_registry().has(kernels::Op::kRmsNorm, "counted")) {
    kernels::kernel_registry().add(
        {"counted", "test", "", kernels::RmsNormFn{&counted_rms_norm}, nullptr});
  }
  kernels::OverrideSettings settings;
  settings.imports = {"rms_norm=counted"};
  kernels::OverrideResolver resolver(settings);
  auto model = build(false, &resolver);
  int block_calls = 0;
  for (Module* b : model->blocks()) b->add_forward_hooks([&](Module&) { ++block_calls; }, {});
  apply_activation_checkpointing(model->blocks(), ac("selective", "op"));
  norm_calls = 0;
  loss_and_grads(*model);
  EXPECT_EQ(block_calls, 4);
  // 4 norms per block, each run again in backward; the final norm (not in a block) once.
  EXPECT_EQ(norm_calls.load(), 4 * 4 * 2 + 1);
}

TEST(Modules, HooksRunAroundEachForwardInOrder) {
  auto model = build(false);
  std::vector<std::string> events;
  for (Module* m : model->modules()) {
    m->add_forward_hooks([&](Module& mod) { events.push_back("before " + mod.path()); },
                         [&](Module& mod) { events.push_back("after " + mod.path()); });
  }
  at::NoGradGuard no_grad;
  model->forward(some_ids());
  ASSERT_EQ(events.size(), 12u);
  EXPECT_EQ(events[0], "before tok_embeddings");
  EXPECT_EQ(events[1], "after tok_embeddings");
  EXPECT_EQ(events[2], "before layers.0");
  EXPECT_EQ(events[9], "after layers.3");
  EXPECT_EQ(events[11], "after norm");
}

TEST(Modules, AWrapperCanSwapTheTensorsInABlocksParameterSlots) {
  // What FSDP does: put other tensors in the slots for the forward, then put the originals
  // back. Here layer 1's q_proj is swapped for zeros during its forward.
  auto wrapped = build(false);
  Module* block = wrapped->blocks()[1];
  const std::string target = "model.layers.1.self_attn.q_proj.weight";
  block->add_wrapper([&](Module& m, const Tensors& in, const ForwardFn& inner) {
    at::Tensor saved;
    m.visit_parameters([&](const std::string& name, at::Tensor& slot) {
      if (name != target) return;
      saved = slot;
      slot = at::zeros_like(slot);
    });
    Tensors out = inner(in);
    m.visit_parameters([&](const std::string& name, at::Tensor& slot) {
      if (name == target) slot = saved;
    });
    return out;
  });
  auto zeroed = build(false);
  {
    at::NoGradGuard no_grad;
    for (auto& [name, p] : zeroed->named_parameters())
      if (name == target) p.zero_();
  }
  at::NoGradGuard no_grad;
  const at::Tensor a = wrapped->forward(some_ids()).hidden;
  const at::Tensor b = zeroed->forward(some_ids()).hidden;
  EXPECT_TRUE(at::equal(a, b));
  // The original tensor is back in its slot afterwards.
  for (auto& [name, p] : wrapped->named_parameters()) {
    if (name == target) {
      EXPECT_GT(p.abs().sum().item<double>(), 0.0);
    }
  }
}

}  // namespace
}  // namespace titan::models
