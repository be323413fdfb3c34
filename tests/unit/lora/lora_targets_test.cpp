// lora.target_modules against the weights a model offers (lora/lora_targets.h).
#include <gtest/gtest.h>

#include "error_of.h"
#include "titan/lora/lora_targets.h"

namespace titan::lora {
namespace {

using titan::testing::error_of;

std::vector<Target> two_layer_moe() {
  std::vector<Target> out;
  for (int layer = 0; layer < 2; ++layer) {
    const std::string p = "model.layers." + std::to_string(layer) + ".";
    for (const char* proj :
         {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj"})
      out.push_back({p + proj + ".weight", p + proj, false});
    for (const char* stack : {"mlp.experts.gate_up_proj", "mlp.experts.down_proj"})
      out.push_back({p + stack, p + stack, true});
  }
  return out;
}

std::vector<std::string> modules(const std::vector<Target>& targets) {
  std::vector<std::string> out;
  for (const Target& t : targets) out.push_back(t.module);
  return out;
}

TEST(LoraTargets, DefaultIsEveryLinearProjectionAndNoExpertStack) {
  const auto targets = select_targets(two_layer_moe(), config::LoraConfig{});
  ASSERT_EQ(targets.size(), 8u);
  for (const Target& t : targets) EXPECT_FALSE(t.experts) << t.module;
  EXPECT_EQ(targets.front().module, "model.layers.0.self_attn.q_proj");
}

TEST(LoraTargets, PlainNamesMatchTheLastComponentAndGlobsTheWholePath) {
  config::LoraConfig lora;
  lora.target_modules = {"q_proj", "model.layers.1.*.down_proj"};
  EXPECT_EQ(modules(select_targets(two_layer_moe(), lora)),
            (std::vector<std::string>{"model.layers.0.self_attn.q_proj",
                                      "model.layers.1.self_attn.q_proj",
                                      "model.layers.1.mlp.experts.down_proj"}));
  // A glob must match the whole path: "layers.1.*" is not a suffix match.
  lora.target_modules = {"layers.1.*"};
  EXPECT_NE(error_of([&] { select_targets(two_layer_moe(), lora); }).find("matches no module"),
            std::string::npos);
  EXPECT_TRUE(target_matches("*experts*", "model.layers.0.mlp.experts.down_proj"));
  EXPECT_FALSE(target_matches("proj", "model.layers.0.self_attn.q_proj"));
}

TEST(LoraTargets, AnEntryMatchingNothingIsAnErrorNamingIt) {
  config::LoraConfig lora;
  lora.target_modules = {"q_proj", "gate_proj"};  // a MoE model has no dense MLP
  const std::string message = error_of([&] { select_targets(two_layer_moe(), lora); });
  EXPECT_NE(message.find("\"gate_proj\" matches no module"), std::string::npos) << message;
}

TEST(LoraTargets, Nf4AndDropoutAreRefusedOnExpertStacks) {
  config::LoraConfig lora;
  lora.target_modules = {"*.experts.gate_up_proj"};
  lora.base_quantization = "nf4";
  std::string message = error_of([&] { select_targets(two_layer_moe(), lora); });
  EXPECT_NE(message.find("model.layers.0.mlp.experts.gate_up_proj is an expert stack, not a "
                         "linear weight"),
            std::string::npos)
      << message;
  lora.base_quantization = "none";
  lora.dropout = 0.1;
  message = error_of([&] { select_targets(two_layer_moe(), lora); });
  EXPECT_NE(message.find("lora.dropout = 0.1 cannot apply to model.layers.0.mlp.experts"),
            std::string::npos)
      << message;
  lora.dropout = 0;
  EXPECT_EQ(select_targets(two_layer_moe(), lora).size(), 2u);
}

}  // namespace
}  // namespace titan::lora
