// Activation checkpointing recomputes layers in backward; the gradients must be those of the
// plain model (the recomputation is the same deterministic computation).
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "titan/common/error.h"
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

// Loss and every gradient after one backward with the given mode.
std::vector<at::Tensor> gradients(bool moe, const std::string& mode) {
  BuildOptions build;
  build.seed = 3;
  Qwen3Model model(small_model(moe), Qwen3Options{}, build);
  model.set_activation_checkpointing(mode);
  const at::Tensor ids = at::arange(24, at::kLong).remainder(101).view({2, 12});
  const at::Tensor loss = model.forward(ids).logsumexp(-1).mean();
  loss.backward();
  std::vector<at::Tensor> out{loss.detach()};
  for (auto& [name, p] : model.named_parameters()) out.push_back(p.grad().clone());
  return out;
}

TEST(ActivationCheckpoint, GradientsEqualThePlainModel) {
  for (bool moe : {false, true}) {
    const auto plain = gradients(moe, "none");
    for (const std::string mode : {"selective", "full"}) {
      const auto recomputed = gradients(moe, mode);
      ASSERT_EQ(plain.size(), recomputed.size());
      for (size_t i = 0; i < plain.size(); ++i)
        EXPECT_TRUE(at::equal(plain[i], recomputed[i])) << mode << " tensor " << i;
    }
  }
}

TEST(ActivationCheckpoint, UnknownModeIsAnError) {
  Qwen3Model model(small_model(false), Qwen3Options{}, BuildOptions{});
  EXPECT_THROW(model.set_activation_checkpointing("sometimes"), titan::Error);
}

}  // namespace
}  // namespace titan::models
