// The model registry: the built-in families are registered in one place, and a Hugging Face
// config.json picks its spec by model_type (or architectures), with one clear error otherwise.
#include <gtest/gtest.h>

#include "titan/common/error.h"
#include "titan/models/model_spec.h"

namespace titan::models {
namespace {

std::string error_of(const nlohmann::json& config) {
  try {
    spec_for_hf_config(config, "dir/config.json");
  } catch (const titan::Error& e) {
    return e.what();
  }
  return "";
}

TEST(ModelRegistry, BuiltinsAreRegisteredWithEverythingTheTrainerCalls) {
  const std::vector<std::string> names = model_spec_names();
  ASSERT_FALSE(names.empty());
  for (const std::string& name : names) {
    const ModelSpec& spec = get_model_spec(name);
    EXPECT_EQ(spec.name, name);
    EXPECT_TRUE(spec.build && spec.build_from_hf_config && spec.parallelize &&
                spec.post_optimizer_build && spec.adapter.to_hf && spec.adapter.from_hf &&
                spec.flops_per_token)
        << name;
  }
  try {
    get_model_spec("llama");
    FAIL() << "no error";
  } catch (const titan::Error& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "model.name = \"llama\": accepted values are llama3, qwen3, transformers"),
              std::string::npos)
        << e.what();
  }
}

TEST(ModelRegistry, HfConfigPicksItsSpec) {
  EXPECT_EQ(spec_for_hf_config({{"model_type", "qwen3"}}, "c").name, "qwen3");
  EXPECT_EQ(spec_for_hf_config({{"model_type", "qwen3_moe"}}, "c").name, "qwen3");
  EXPECT_EQ(spec_for_hf_config({{"architectures", {"Qwen3MoeForCausalLM"}}}, "c").name, "qwen3");
  EXPECT_EQ(spec_for_hf_config({{"model_type", "llama"}}, "c").name, "llama3");
  EXPECT_EQ(spec_for_hf_config({{"architectures", {"LlamaForCausalLM"}}}, "c").name, "llama3");
}

TEST(ModelRegistry, UnsupportedModelTypeListsWhatIsSupported) {
  const std::string e = error_of({{"model_type", "gpt2"}, {"architectures", {"GPT2LMHeadModel"}}});
  EXPECT_NE(e.find("dir/config.json: model_type 'gpt2' [\"GPT2LMHeadModel\"] is not supported"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("supported model types: llama (llama3), qwen3 (qwen3), qwen3_moe (qwen3)"),
            std::string::npos)
      << e;
  EXPECT_NE(error_of({{"architectures", {"GPT2LMHeadModel"}}}).find("no model_type"),
            std::string::npos);
  EXPECT_NE(error_of({{"vocab_size", 3}}).find("no model_type"), std::string::npos);
  EXPECT_NE(error_of(nlohmann::json::array()).find("must be a JSON object"), std::string::npos);
}

}  // namespace
}  // namespace titan::models
