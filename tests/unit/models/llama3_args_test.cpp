// config.json reading and writing for Llama3Args (as transformers 5.17's LlamaConfig reads it),
// and flavor resolution.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "titan/common/error.h"
#include "titan/models/llama3/llama3_args.h"
#include "titan/models/llama3/model.h"

namespace titan::models {
namespace {

using nlohmann::json;

// A Transformers v5 style config (rope_parameters, dtype) with Llama 3.1's scaling.
json v5_config() {
  return json::parse(R"({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "vocab_size": 1000, "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 3,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 24,
    "rms_norm_eps": 1e-05, "max_position_embeddings": 4096, "tie_word_embeddings": true,
    "rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                        "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                        "original_max_position_embeddings": 512},
    "dtype": "bfloat16", "bos_token_id": 128000, "eos_token_id": [128001, 128009]})");
}

// The same model with Transformers v4 keys (rope_theta, rope_scaling, torch_dtype).
json v4_config() {
  json c = v5_config();
  c.erase("rope_parameters");
  c.erase("dtype");
  c["rope_theta"] = 500000.0;
  c["rope_scaling"] = {{"rope_type", "llama3"},
                       {"factor", 8.0},
                       {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 512}};
  c["torch_dtype"] = "bfloat16";
  return c;
}

void expect_same(const Llama3Args& a, const Llama3Args& b) {
  EXPECT_EQ(llama3_args_to_hf_config(a, "float32").dump(),
            llama3_args_to_hf_config(b, "float32").dump());
  EXPECT_EQ(a.dtype, b.dtype);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

std::string read_error(const json& c) {
  return error_of([&] { llama3_args_from_hf_config(c, "/m/config.json"); });
}

TEST(Llama3Args, V4AndV5KeysGiveTheSameArgs) {
  const Llama3Args v5 = llama3_args_from_hf_config(v5_config(), "v5/config.json");
  const Llama3Args v4 = llama3_args_from_hf_config(v4_config(), "v4/config.json");
  expect_same(v4, v5);
  EXPECT_EQ(v5.rope_type, "llama3");
  EXPECT_EQ(v5.rope_theta, 500000.0);
  EXPECT_EQ(v5.rope_factor, 8.0);
  EXPECT_EQ(v5.rope_original_max_position_embeddings, 512);
  EXPECT_EQ(v5.head_dim, 24);
  EXPECT_EQ(v5.dtype, "bfloat16");
  EXPECT_EQ(v5.eos_token_id, (std::vector<int64_t>{128001, 128009}));
  // The legacy "type" key names the type as well; rope_type wins over it.
  json legacy = v4_config();
  legacy["rope_scaling"].erase("rope_type");
  legacy["rope_scaling"]["type"] = "llama3";
  expect_same(llama3_args_from_hf_config(legacy, "c"), v4);
}

TEST(Llama3Args, AbsentKeysTakeLlamaConfigsDefaults) {
  const Llama3Args a = llama3_args_from_hf_config(json::parse(R"({"model_type": "llama"})"), "d");
  EXPECT_EQ(a.vocab_size, 32000);
  EXPECT_EQ(a.hidden_size, 4096);
  EXPECT_EQ(a.intermediate_size, 11008);
  EXPECT_EQ(a.num_hidden_layers, 32);
  EXPECT_EQ(a.num_attention_heads, 32);
  EXPECT_EQ(a.num_key_value_heads, 32);  // None -> num_attention_heads
  EXPECT_EQ(a.head_dim, 128);            // None -> hidden_size // num_attention_heads
  EXPECT_EQ(a.max_position_embeddings, 2048);
  EXPECT_EQ(a.rms_norm_eps, 1e-6);
  EXPECT_EQ(a.rope_type, "default");
  EXPECT_EQ(a.rope_theta, 10000.0);
  EXPECT_EQ(a.bos_token_id, 1);
  EXPECT_EQ(a.eos_token_id, std::vector<int64_t>{2});
  EXPECT_FALSE(a.pad_token_id.has_value());
  EXPECT_FALSE(a.tie_word_embeddings);
  EXPECT_FALSE(a.attention_bias);
  EXPECT_EQ(a.dtype, "float32");
  // head_dim follows the hidden size and heads when absent.
  const Llama3Args b = llama3_args_from_hf_config(
      json::parse(R"({"model_type": "llama", "hidden_size": 96, "num_attention_heads": 6})"), "d");
  EXPECT_EQ(b.head_dim, 16);
  EXPECT_EQ(b.num_key_value_heads, 6);
}

TEST(Llama3Args, ExplicitNullTokenIdsAreNone) {
  json c = v5_config();
  c["bos_token_id"] = nullptr;
  c["eos_token_id"] = nullptr;
  const Llama3Args a = llama3_args_from_hf_config(c, "c");
  EXPECT_FALSE(a.bos_token_id.has_value());
  EXPECT_TRUE(a.eos_token_id.empty());
  // and they stay none through a write and a read
  const Llama3Args back = llama3_args_from_hf_config(llama3_args_to_hf_config(a, "float32"), "c");
  EXPECT_FALSE(back.bos_token_id.has_value());
  EXPECT_TRUE(back.eos_token_id.empty());
}

TEST(Llama3Args, OriginalContextDefaultsToMaxPositionsAndATopLevelKeyWins) {
  json c = v5_config();
  c["rope_parameters"].erase("original_max_position_embeddings");
  EXPECT_EQ(llama3_args_from_hf_config(c, "c").rope_original_max_position_embeddings, 4096);
  c["original_max_position_embeddings"] = 256;
  EXPECT_EQ(llama3_args_from_hf_config(c, "c").rope_original_max_position_embeddings, 256);
  // The top-level theta is the fallback, the dictionary's wins.
  c = v5_config();
  c["rope_theta"] = 1234.0;
  EXPECT_EQ(llama3_args_from_hf_config(c, "c").rope_theta, 500000.0);
  c["rope_parameters"].erase("rope_theta");
  EXPECT_EQ(llama3_args_from_hf_config(c, "c").rope_theta, 1234.0);
}

TEST(Llama3Args, UnsupportedValuesAreOneErrorNamingTheKey) {
  const auto expect = [](const std::string& error, const std::string& needle) {
    EXPECT_NE(error.find("/m/config.json"), std::string::npos) << error;
    EXPECT_NE(error.find(needle), std::string::npos) << error;
  };
  json c = v5_config();
  c["mlp_bias"] = true;
  expect(read_error(c), "mlp_bias=true is not supported");
  c = v5_config();
  c["hidden_act"] = "gelu";
  expect(read_error(c), "hidden_act 'gelu' is not supported");
  c = v5_config();
  c["rope_parameters"]["rope_type"] = "yarn";
  expect(read_error(c),
         "rope_parameters.rope_type 'yarn' is not supported (supported: default, "
         "llama3)");
  c = v4_config();
  c["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  expect(read_error(c), "rope_scaling.rope_type 'linear' is not supported");
  c = v5_config();
  c["rope_parameters"].erase("low_freq_factor");
  expect(read_error(c), "rope_parameters.low_freq_factor is missing");
  c = v5_config();
  c["rope_parameters"]["partial_rotary_factor"] = 0.5;
  expect(read_error(c), "partial_rotary_factor 0.5 is not supported");
  c = v5_config();
  c["hidden_size"] = "64";
  expect(read_error(c), "key 'hidden_size' must be an integer");
  c = v5_config();
  c["rope_parameters"]["factor"] = "8";
  expect(read_error(c), "key 'factor' must be a number");
  c = v5_config();
  c["hidden_size"] = 66;  // LlamaConfig refuses it, head_dim or not
  expect(read_error(c), "hidden_size (66) must be a multiple of num_attention_heads (4)");
  c = v5_config();
  c["num_key_value_heads"] = 3;
  expect(read_error(c), "num_attention_heads (4) must be a multiple of num_key_value_heads (3)");
  c = v5_config();
  c["model_type"] = "qwen3";
  expect(read_error(c), "model_type 'qwen3' is not supported (need llama)");
  EXPECT_NE(read_error(json::array()).find("must be a JSON object"), std::string::npos);
}

TEST(Llama3Args, WrittenConfigReadsBackToTheSameArgs) {
  for (const auto& name : llama3_flavor_names()) {
    SCOPED_TRACE(name);
    const Llama3Args a = llama3_flavor(name);
    EXPECT_NO_THROW(a.validate(name));
    const json c = llama3_args_to_hf_config(a, "bfloat16");
    EXPECT_EQ(c.at("model_type"), "llama");
    EXPECT_EQ(c.at("architectures"), json::array({"LlamaForCausalLM"}));
    EXPECT_TRUE(c.at("rope_theta").is_number_float());
    EXPECT_TRUE(c.at("rms_norm_eps").is_number_float());
    // v4 reads rope_scaling, v5 rope_parameters: both say llama3 with every key.
    for (const char* key : {"rope_scaling", "rope_parameters"}) {
      EXPECT_EQ(c.at(key).at("rope_type"), "llama3") << key;
      EXPECT_EQ(c.at(key).at("factor"), a.rope_factor) << key;
      EXPECT_EQ(c.at(key).at("low_freq_factor"), a.rope_low_freq_factor) << key;
      EXPECT_EQ(c.at(key).at("high_freq_factor"), a.rope_high_freq_factor) << key;
      EXPECT_EQ(c.at(key).at("original_max_position_embeddings"),
                a.rope_original_max_position_embeddings)
          << key;
    }
    EXPECT_EQ(c.at("mlp_bias"), false);
    EXPECT_EQ(c.at("dtype"), "bfloat16");
    EXPECT_EQ(c.at("torch_dtype"), "bfloat16");
    expect_same(llama3_args_from_hf_config(c, name), a);
  }
  Llama3Args plain = llama3_flavor("debugmodel");
  plain.rope_type = "default";
  const json c = llama3_args_to_hf_config(plain, "bfloat16");
  EXPECT_TRUE(c.at("rope_scaling").is_null());
  EXPECT_EQ(c.at("rope_parameters"), json({{"rope_theta", 500000.0}, {"rope_type", "default"}}));
  expect_same(llama3_args_from_hf_config(c, "plain"), plain);
}

TEST(Llama3Args, DecoderHasNoQkNormAndLlamaRope) {
  const DecoderConfig d = llama3_decoder_config(llama3_args_from_hf_config(v5_config(), "c"));
  EXPECT_FALSE(d.attention.qk_norm);
  EXPECT_EQ(d.rope.type, "llama3");
  EXPECT_EQ(d.rope.original_max_position_embeddings, 512);
  EXPECT_EQ(d.rope.low_freq_factor, 1.0);
  EXPECT_EQ(d.rope.high_freq_factor, 4.0);
  EXPECT_EQ(d.moe.num_experts, 0);
  EXPECT_EQ(d.sparse, std::vector<bool>(3, false));
}

class Llama3FlavorResolution : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("titan_llama3_args_" + std::to_string(::getpid()) + "_" +
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

TEST_F(Llama3FlavorResolution, NamedFlavorWithoutConfigIsTheFlavor) {
  expect_same(resolve_llama3_args(model("8B")), llama3_flavor("8B"));
  EXPECT_NE(error_of([&] { resolve_llama3_args(model("auto")); }).find("config.json"),
            std::string::npos);
}

TEST_F(Llama3FlavorResolution, AutoTakesEveryDimensionFromTheFile) {
  write(v4_config());
  expect_same(resolve_llama3_args(model("auto")), llama3_args_from_hf_config(v4_config(), "x"));
}

TEST_F(Llama3FlavorResolution, MatchingFlavorTakesTheFilesTokenIds) {
  json c = llama3_args_to_hf_config(llama3_flavor("1B"), "bfloat16");
  c["eos_token_id"] = json::array({128001, 128008, 128009});  // an -Instruct checkpoint
  write(c);
  const Llama3Args a = resolve_llama3_args(model("1B"));
  EXPECT_EQ(a.eos_token_id, (std::vector<int64_t>{128001, 128008, 128009}));
  EXPECT_EQ(a.hidden_size, llama3_flavor("1B").hidden_size);
}

TEST_F(Llama3FlavorResolution, MismatchNamesFieldAndBothValues) {
  json c = llama3_args_to_hf_config(llama3_flavor("8B"), "bfloat16");
  c["rope_parameters"]["factor"] = 32.0;
  c["rope_scaling"]["factor"] = 32.0;
  write(c);
  const std::string msg = error_of([&] { resolve_llama3_args(model("8B")); });
  EXPECT_NE(msg.find("rope factor is 8 in the flavor but 32 in the file"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("--model.flavor auto"), std::string::npos) << msg;
  const std::string unknown = error_of([&] { resolve_llama3_args(model("405B")); });
  EXPECT_NE(unknown.find("unknown Llama 3 flavor '405B' (known: debugmodel, 1B, 3B, 8B, 70B"),
            std::string::npos)
      << unknown;
}

}  // namespace
}  // namespace titan::models
