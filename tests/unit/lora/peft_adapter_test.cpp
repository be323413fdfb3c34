// PEFT's names and layouts of adapter tensors (lora/peft_adapter.h), and the LoRA description a
// checkpoint keeps (lora/lora_model.h).
#include <gtest/gtest.h>

#include "titan/lora/lora_model.h"
#include "titan/lora/peft_adapter.h"

namespace titan::lora {
namespace {

const Target q{"model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.q_proj", false};
const Target gate_up{"model.layers.1.mlp.experts.gate_up_proj",
                     "model.layers.1.mlp.experts.gate_up_proj", true};
const Target down{"model.layers.1.mlp.experts.down_proj", "model.layers.1.mlp.experts.down_proj",
                  true};

TEST(PeftAdapter, LinearKeysAreTheModulePathUnderBaseModelModel) {
  EXPECT_EQ(peft_key(q, true, {q}),
            "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight");
  EXPECT_EQ(peft_key(q, false, {q}),
            "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight");
}

TEST(PeftAdapter, ExpertStacksNestWhenBothAreAdapted) {
  // One stack: PEFT's ParamWrapper sits on the experts module itself.
  EXPECT_EQ(peft_key(down, true, {q, down}),
            "base_model.model.model.layers.1.mlp.experts.lora_A.weight");
  // Both: gate_up_proj's wrapper is the inner one (base_layer), down_proj's the outer.
  const std::vector<Target> both = {q, gate_up, down};
  EXPECT_EQ(peft_key(gate_up, true, both),
            "base_model.model.model.layers.1.mlp.experts.base_layer.lora_A.weight");
  EXPECT_EQ(peft_key(down, false, both),
            "base_model.model.model.layers.1.mlp.experts.lora_B.weight");
}

TEST(PeftAdapter, ExpertLayoutsRoundTripAndMatchPeftsDelta) {
  const int64_t E = 3, r = 2, in = 5, out = 4;
  at::manual_seed(0);
  const at::Tensor a = at::randn({E, r, in}), b = at::randn({E, out, r});
  const at::Tensor a_peft = to_peft_layout(gate_up, true, a);
  const at::Tensor b_peft = to_peft_layout(gate_up, false, b);
  ASSERT_EQ(a_peft.sizes(), (std::vector<int64_t>{E * r, in}));
  ASSERT_EQ(b_peft.sizes(), (std::vector<int64_t>{out, r * E}));
  EXPECT_TRUE(at::equal(from_peft_layout(gate_up, true, a_peft, E), a));
  EXPECT_TRUE(at::equal(from_peft_layout(gate_up, false, b_peft, E), b));
  // PEFT's ParamWrapper delta: einsum("o r e, e r i -> e o i", B.reshape(out, r, E),
  // A.reshape(E, r, in)); column j * E + e of B is expert e's column j.
  for (int64_t e = 0; e < E; ++e) {
    const at::Tensor peft_delta =
        at::matmul(b_peft.reshape({out, r, E}).select(2, e), a_peft.reshape({E, r, in})[e]);
    EXPECT_TRUE(at::allclose(peft_delta, at::matmul(b[e], a[e]))) << e;
  }
  // Linear adapters are stored as they are.
  EXPECT_TRUE(at::equal(to_peft_layout(q, true, a[0]), a[0]));
}

TEST(LoraSetupJson, RoundTripsAndNamesAMalformedOne) {
  LoraSetup s;
  s.config.rank = 16;
  s.config.alpha = 32;
  s.config.dropout = 0.05;
  s.config.target_modules = {"q_proj", "*.experts.down_proj"};
  s.config.base_quantization = "nf4";
  s.targets = {q, down};
  s.base = {"/models/Qwen3-0.6B", "0123456789abcdef"};
  const LoraSetup back = LoraSetup::from_json(s.to_json(), "manifest.json");
  EXPECT_EQ(back.to_json(), s.to_json());
  EXPECT_EQ(back.targets.size(), 2u);
  EXPECT_TRUE(back.targets[1].experts);
  nlohmann::json broken = s.to_json();
  broken.erase("rank");
  try {
    LoraSetup::from_json(broken, "step-3/manifest.json");
    FAIL() << "accepted a description without its rank";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("step-3/manifest.json: malformed LoRA description"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace titan::lora
