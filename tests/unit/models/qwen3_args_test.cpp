// config.json parsing and writing for Qwen3Args, and flavor resolution.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "titan/common/error.h"
#include "titan/models/qwen3/qwen3_args.h"

namespace titan::models {
namespace {

using nlohmann::json;

// A Transformers v5 style MoE config (rope_parameters, num_local_experts, dtype).
json v5_moe_config() {
  return json::parse(R"({
    "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
    "vocab_size": 1000, "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 3,
    "num_attention_heads": 6, "num_key_value_heads": 2, "head_dim": 24,
    "rms_norm_eps": 1e-06, "rope_parameters": {"rope_theta": 1000000.0, "rope_type": "default"},
    "num_local_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
    "norm_topk_prob": true, "decoder_sparse_step": 1, "mlp_only_layers": [1],
    "tie_word_embeddings": false, "dtype": "bfloat16", "bos_token_id": 1, "eos_token_id": 2,
    "max_position_embeddings": 4096})");
}

// The same model with Transformers v4 keys (rope_theta, rope_scaling, num_experts, torch_dtype).
json v4_moe_config() {
  json c = v5_moe_config();
  c.erase("rope_parameters");
  c.erase("num_local_experts");
  c.erase("dtype");
  c["rope_theta"] = 1000000.0;
  c["rope_scaling"] = nullptr;
  c["num_experts"] = 8;
  c["torch_dtype"] = "bfloat16";
  return c;
}

void expect_same(const Qwen3Args& a, const Qwen3Args& b) {
  EXPECT_EQ(qwen3_args_to_hf_config(a, "float32").dump(),
            qwen3_args_to_hf_config(b, "float32").dump());
  EXPECT_EQ(a.dtype, b.dtype);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Qwen3Args, V4AndV5KeysGiveTheSameArgs) {
  const Qwen3Args v5 = qwen3_args_from_hf_config(v5_moe_config(), "v5/config.json");
  const Qwen3Args v4 = qwen3_args_from_hf_config(v4_moe_config(), "v4/config.json");
  expect_same(v4, v5);
  EXPECT_EQ(v5.num_experts, 8);
  EXPECT_EQ(v5.rope_theta, 1000000.0);
  EXPECT_EQ(v5.dtype, "bfloat16");
  EXPECT_EQ(v5.head_dim, 24);
  EXPECT_FALSE(v5.is_sparse_layer(1));
  EXPECT_TRUE(v5.is_sparse_layer(2));
}

TEST(Qwen3Args, DtypeKeyWinsOverTorchDtype) {
  json c = v5_moe_config();
  c["torch_dtype"] = "float16";
  EXPECT_EQ(qwen3_args_from_hf_config(c, "c").dtype, "bfloat16");
}

TEST(Qwen3Args, LegacyRopeScalingReplacesRopeParameters) {
  json c = v5_moe_config();
  c["rope_scaling"] = {
      {"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 1024}};
  c["rope_theta"] = 5000.0;
  const Qwen3Args a = qwen3_args_from_hf_config(c, "c");
  EXPECT_EQ(a.rope_type, "yarn");
  EXPECT_EQ(a.rope_factor, 4.0);
  EXPECT_EQ(a.rope_original_max_position_embeddings, 1024);
  EXPECT_EQ(a.rope_theta, 5000.0);  // the dict has none: top-level key
}

TEST(Qwen3Args, AbsentKeysTakeTheTransformersClassDefaults) {
  const Qwen3Args dense = qwen3_args_from_hf_config(
      json::parse(R"({"model_type": "qwen3", "hidden_size": 64, "num_attention_heads": 4})"), "d");
  EXPECT_EQ(dense.head_dim, 128);           // Qwen3Config.head_dim
  EXPECT_EQ(dense.num_key_value_heads, 4);  // None -> num_attention_heads
  EXPECT_EQ(dense.rope_theta, 10000.0);
  EXPECT_FALSE(dense.tie_word_embeddings);
  EXPECT_FALSE(dense.is_moe());
  const Qwen3Args moe = qwen3_args_from_hf_config(
      json::parse(R"({"model_type": "qwen3_moe", "hidden_size": 64, "num_attention_heads": 4})"),
      "m");
  EXPECT_FALSE(moe.norm_topk_prob);
  EXPECT_EQ(moe.num_experts, 128);
  EXPECT_EQ(moe.num_experts_per_tok, 8);
  EXPECT_EQ(moe.num_key_value_heads, 4);
  // Qwen3MoeConfig declares no head_dim: the modeling code uses hidden_size // heads.
  EXPECT_EQ(moe.head_dim, 16);
}

TEST(Qwen3Args, OtherArchitectureIsAnErrorNamingFileAndType) {
  const std::string msg = error_of([] {
    qwen3_args_from_hf_config(json::parse(R"({"model_type": "llama"})"), "/x/config.json");
  });
  EXPECT_NE(msg.find("/x/config.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("llama"), std::string::npos) << msg;
}

TEST(Qwen3Args, WrongJsonTypeNamesTheKey) {
  json c = v5_moe_config();
  c["hidden_size"] = "64";
  std::string msg = error_of([&] { qwen3_args_from_hf_config(c, "f.json"); });
  EXPECT_NE(msg.find("hidden_size"), std::string::npos) << msg;
  EXPECT_NE(msg.find("f.json"), std::string::npos) << msg;
  c = v5_moe_config();
  c["norm_topk_prob"] = 1;
  msg = error_of([&] { qwen3_args_from_hf_config(c, "f.json"); });
  EXPECT_NE(msg.find("norm_topk_prob"), std::string::npos) << msg;
}

TEST(Qwen3Args, WrittenConfigReadsBackToTheSameArgs) {
  for (const auto& name : qwen3_flavor_names()) {
    const Qwen3Args a = qwen3_flavor(name);
    const json c = qwen3_args_to_hf_config(a, "bfloat16");
    EXPECT_TRUE(c.at("rms_norm_eps").is_number_float()) << name;
    EXPECT_TRUE(c.at("initializer_range").is_number_float()) << name;
    EXPECT_TRUE(c.at("rope_theta").is_number_float()) << name;
    EXPECT_TRUE(c.at("rope_scaling").is_null()) << name;
    EXPECT_EQ(c.at("head_dim"), a.head_dim) << name;
    EXPECT_EQ(c.at("dtype"), "bfloat16");
    EXPECT_EQ(c.at("torch_dtype"), "bfloat16");
    expect_same(qwen3_args_from_hf_config(c, name), a);
    if (a.is_moe()) {
      EXPECT_EQ(c.at("num_experts"), a.num_experts);
      EXPECT_EQ(c.at("architectures")[0], "Qwen3MoeForCausalLM");
    } else {
      EXPECT_EQ(c.at("layer_types").size(), static_cast<size_t>(a.num_hidden_layers));
    }
  }
}

class FlavorResolution : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("titan_qwen3_args_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void write(const json& c) { std::ofstream(dir_ / "config.json") << c.dump(); }
  config::ModelConfig model(const std::string& flavor) {
    config::ModelConfig m;
    m.flavor = flavor;
    m.hf_assets_path = dir_.string();
    return m;
  }
  std::filesystem::path dir_;
};

TEST_F(FlavorResolution, NamedFlavorWithoutConfigIsTheFlavor) {
  const Qwen3Args a = resolve_qwen3_args(model("debugmodel"));
  expect_same(a, qwen3_flavor("debugmodel"));
}

TEST_F(FlavorResolution, AutoNeedsConfigJson) {
  const std::string msg = error_of([&] { resolve_qwen3_args(model("auto")); });
  EXPECT_NE(msg.find("config.json"), std::string::npos) << msg;
}

TEST_F(FlavorResolution, AutoTakesEveryDimensionFromTheFile) {
  write(v5_moe_config());
  const Qwen3Args a = resolve_qwen3_args(model("auto"));
  expect_same(a, qwen3_args_from_hf_config(v5_moe_config(), "x"));
}

TEST_F(FlavorResolution, MatchingFlavorIsAccepted) {
  json c = qwen3_args_to_hf_config(qwen3_flavor("0.6B"), "bfloat16");
  c["max_position_embeddings"] = 32768;  // a -Base checkpoint: not architecture
  write(c);
  const Qwen3Args a = resolve_qwen3_args(model("0.6B"));
  EXPECT_EQ(a.max_position_embeddings, 32768);
  EXPECT_EQ(a.hidden_size, 1024);
}

TEST_F(FlavorResolution, MismatchNamesFieldAndBothValues) {
  json c = qwen3_args_to_hf_config(qwen3_flavor("0.6B"), "bfloat16");
  c["num_key_value_heads"] = 4;
  write(c);
  const std::string msg = error_of([&] { resolve_qwen3_args(model("0.6B")); });
  EXPECT_NE(msg.find("num_key_value_heads"), std::string::npos) << msg;
  EXPECT_NE(msg.find("is 8"), std::string::npos) << msg;
  EXPECT_NE(msg.find("but 4"), std::string::npos) << msg;
  c = qwen3_args_to_hf_config(qwen3_flavor("0.6B"), "bfloat16");
  c["head_dim"] = 64;
  write(c);
  const std::string msg2 = error_of([&] { resolve_qwen3_args(model("0.6B")); });
  EXPECT_NE(msg2.find("head_dim"), std::string::npos) << msg2;
}

TEST_F(FlavorResolution, UnknownFlavorListsTheKnownOnes) {
  const std::string msg = error_of([&] { resolve_qwen3_args(model("7B")); });
  EXPECT_NE(msg.find("7B"), std::string::npos) << msg;
  EXPECT_NE(msg.find("debugmodel_moe"), std::string::npos) << msg;
}

}  // namespace
}  // namespace titan::models
