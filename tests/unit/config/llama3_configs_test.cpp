// The built-in `llama3` config functions: each resolves, validates, names a real flavor and
// prints to TOML that reads back to itself; they take the qwen3 functions' flags, a
// LlamaForCausalLM folder to fine-tune included.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "config_test_util.h"
#include "titan/config/config_fields.h"
#include "titan/config/resolve.h"
#include "titan/config/toml_overlay.h"
#include "titan/config/validate.h"
#include "titan/models/builtin_configs.h"
#include "titan/models/llama3/llama3_args.h"

namespace titan::config {
namespace {

using testing::flatten;

TrainerConfig resolve_llama3(const std::string& name, std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"--module", "llama3", "--config", name};
  args.insert(args.end(), extra.begin(), extra.end());
  return resolve_config(args, models::builtin_resolve_options());
}

TEST(Llama3Configs, EachResolvesValidatesAndNamesARealFlavor) {
  const auto flavors = models::llama3_flavor_names();
  std::vector<std::string> names;
  for (const auto& fn : models::builtin_config_registry().functions("llama3")) {
    SCOPED_TRACE(fn.name);
    names.push_back(fn.name);
    const TrainerConfig c = resolve_llama3(fn.name);
    EXPECT_NO_THROW(validate_config(c));
    EXPECT_EQ(c.model.name, "llama3");
    EXPECT_NE(std::find(flavors.begin(), flavors.end(), c.model.flavor), flavors.end());
    TrainerConfig reloaded;
    apply_toml_text(reloaded, to_toml(c), fn.name + ".toml");
    EXPECT_EQ(flatten(reloaded), flatten(c));
  }
  EXPECT_EQ(names, (std::vector<std::string>{"llama3_debugmodel", "llama3_8b"}));
}

TEST(Llama3Configs, DebugModelIsTinyWithTheQwen3TokenizersVocabulary) {
  const TrainerConfig c = resolve_llama3("llama3_debugmodel");
  const models::Llama3Args args = models::llama3_flavor(c.model.flavor);
  EXPECT_EQ(args.vocab_size, 151936);
  EXPECT_LE(args.hidden_size, 512);
  EXPECT_EQ(args.rope_type, "llama3");
  EXPECT_TRUE(c.model.hf_assets_path.ends_with("assets/qwen3-tokenizer")) << c.model.hf_assets_path;
  EXPECT_EQ(models::llama3_flavor(resolve_llama3("llama3_8b").model.flavor).hidden_size, 4096);
}

TEST(Llama3Configs, AFolderToFineTuneReplacesTheFlavorAndAssets) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("titan_llama3_cfg_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << R"({"model_type": "llama"})";
  const TrainerConfig c = resolve_llama3(
      "llama3_debugmodel", {"--model.flavor", "auto", "--checkpoint.initial_load_path",
                            dir.string(), "--checkpoint.initial_load_in_hf", "true"});
  std::filesystem::remove_all(dir);
  EXPECT_EQ(c.model.flavor, "auto");
  EXPECT_EQ(c.model.hf_assets_path, dir.string());
  EXPECT_TRUE(c.checkpoint.initial_load_in_hf);
  EXPECT_EQ(c.model.name, "llama3");
}

}  // namespace
}  // namespace titan::config
