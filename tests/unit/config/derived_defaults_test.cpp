// The defaults that follow from the rest of the command line (derived_defaults.h): built-in
// dataset names, built-in paths beside the installation, and the fine-tuned folder as the source
// of the tokenizer and config.json.
#include "titan/config/derived_defaults.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "config_test_util.h"
#include "titan/config/resolve.h"

namespace titan::config {
namespace {

namespace fs = std::filesystem;
using testing::error_of;

// A folder as save_pretrained leaves it (config.json), or a training checkpoint (manifest.json).
std::string make_folder(const std::string& name, const std::vector<std::string>& files) {
  const fs::path dir = fs::path(::testing::TempDir()) / name;
  fs::create_directories(dir);
  for (const auto& f : files) std::ofstream(dir / f) << "{}";
  return dir.string();
}

ConfigRegistry registry() {
  ConfigRegistry r;
  r.add(
      "toy", "finetune",
      [] {
        TrainerConfig c;
        c.model.flavor = "auto";
        c.model.hf_assets_path = "assets/hf/Qwen3-0.6B";
        c.training.dataset = "python_stdlib";
        c.training.dataset_path = "assets/corpus/python_stdlib.jsonl";
        return c;
      },
      "");
  return r;
}

ResolvedCommandLine resolve(std::vector<std::string> args, const std::string& root = "") {
  static const ConfigRegistry r = registry();
  ResolveOptions options;
  options.registry = &r;
  options.install_root = root;
  args.insert(args.begin(), {"--module", "toy", "--config", "finetune"});
  return resolve_command_line(args, options);
}

TEST(DerivedDefaults, BuiltinPathsAreTakenBesideTheInstallationUserPathsAreNot) {
  const auto r = resolve({"--validator.dataset_path", "held/out.jsonl"}, "/opt/titan");
  EXPECT_EQ(r.config.model.hf_assets_path, "/opt/titan/assets/hf/Qwen3-0.6B");
  EXPECT_EQ(r.config.training.dataset_path, "/opt/titan/assets/corpus/python_stdlib.jsonl");
  EXPECT_EQ(r.config.validator.dataset_path, "held/out.jsonl");          // the user's: the cwd's
  EXPECT_EQ(r.config.job.dump_folder, TrainerConfig{}.job.dump_folder);  // outputs stay here
  const auto mine = resolve({"--training.dataset_path", "mine.jsonl"}, "/opt/titan");
  EXPECT_EQ(mine.config.training.dataset_path, "mine.jsonl");
  // No installation known: everything stays as written.
  EXPECT_EQ(resolve({}).config.model.hf_assets_path, "assets/hf/Qwen3-0.6B");
}

TEST(DerivedDefaults, ADatasetNameIsReadOrRefused) {
  const auto chat = resolve({"--training.dataset", "chat"}, "/opt/titan");
  EXPECT_EQ(chat.config.training.dataset_path, "/opt/titan/assets/sft/chat.jsonl");
  // With a path of the user's, the path wins (torchtitan's dataset_path).
  const auto both = resolve({"--training.dataset", "chat", "--training.dataset_path", "x.jsonl"});
  EXPECT_EQ(both.config.training.dataset_path, "x.jsonl");
  EXPECT_CONTAINS(error_of([] {
                    resolve({"--training.dataset", "wikitext"});
                  }),
                  "training.dataset = \"wikitext\": not a built-in dataset; accepted values are "
                  "python_stdlib, chat");
  // torchtitan's names: fine with a file of the user's (noted), refused without one.
  const auto c4 = resolve({"--training.dataset", "c4", "--training.dataset_path", "c4.jsonl"});
  EXPECT_EQ(c4.config.training.dataset_path, "c4.jsonl");
  ASSERT_EQ(c4.notes.size(), 1u);
  EXPECT_CONTAINS(c4.notes[0], "training.dataset = \"c4\": torchtitan's name");
  EXPECT_CONTAINS(error_of([] {
                    resolve({"--training.dataset", "c4_test"});
                  }),
                  "training.dataset = \"c4_test\" is torchtitan's name for allenai/c4 on the "
                  "Hugging Face hub, which titan does not download: give training.dataset_path");
}

TEST(DerivedDefaults, AnHfInitialLoadFolderSuppliesTheTokenizerAndConfig) {
  const std::string hf = make_folder("hf_model", {"config.json", "tokenizer.json"});
  auto r = resolve({"--checkpoint.initial_load_path", hf}, "/opt/titan");
  EXPECT_EQ(r.config.model.hf_assets_path, hf);
  EXPECT_CONTAINS(describe_model_sources(r.config),
                  "tokenizer from " + hf +
                      " (checkpoint.initial_load_path), model dimensions "
                      "from " +
                      hf + "/config.json (model.flavor auto)");
  // Unless the user names the assets folder.
  r = resolve({"--checkpoint.initial_load_path", hf, "--model.hf_assets_path", "tok"});
  EXPECT_EQ(r.config.model.hf_assets_path, "tok");
  // A training checkpoint is not a Hugging Face folder.
  const std::string step = make_folder("step-3", {"config.json", "manifest.json"});
  r = resolve({"--checkpoint.initial_load_path", step});
  EXPECT_EQ(r.config.model.hf_assets_path, "assets/hf/Qwen3-0.6B");
}

TEST(DerivedDefaults, MissingInputFoldersNameTheirKey) {
  TrainerConfig c;
  c.training.dataset_path.clear();  // the folders' errors, not the (relative) dataset's
  c.checkpoint.initial_load_path = "nope";
  EXPECT_CONTAINS(error_of([&] { check_input_paths(c); }),
                  "checkpoint.initial_load_path = \"nope\": no such directory");
  c.checkpoint.initial_load_path = "";
  c.model.hf_assets_path = "/no/such/assets";
  c.checkpoint.initial_load_in_hf = true;
  const std::string message = error_of([&] { check_input_paths(c); });
  EXPECT_CONTAINS(message, "model.hf_assets_path = \"/no/such/assets\": no such directory");
  EXPECT_CONTAINS(message, "--checkpoint.initial_load_path DIR");
  const std::string no_tokenizer = make_folder("no_tokenizer", {"config.json"});
  c.checkpoint.initial_load_path = no_tokenizer;
  c.model.hf_assets_path = no_tokenizer;
  EXPECT_CONTAINS(error_of([&] { check_input_paths(c); }),
                  "no tokenizer.json there (it is checkpoint.initial_load_path");
}

}  // namespace
}  // namespace titan::config
