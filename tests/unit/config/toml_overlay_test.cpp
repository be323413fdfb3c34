// The --config-file overlay: types, partial overlays, and every error naming file and key.
#include "titan/config/toml_overlay.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "config_test_util.h"
#include "titan/config/config_fields.h"

namespace titan::config {
namespace {

using testing::error_of;
using testing::flatten;

std::string write_temp(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::path(::testing::TempDir()) / name;
  std::ofstream(path) << text;
  return path.string();
}

TEST(TomlOverlay, SetsEveryTypeAndLeavesOtherFieldsAlone) {
  TrainerConfig c;
  apply_toml_text(c, R"(
[training]
steps = 100
max_norm = 2          # an integer where a float is expected is fine
deterministic = true
dataset_path = "data/x.jsonl"

[optimizer]
betas = [0.8, 1]
param_groups = ["*.bias=0", "*=0.1"]
)",
                  "job.toml");
  EXPECT_EQ(c.training.steps, 100);
  EXPECT_EQ(c.training.max_norm, 2.0);
  EXPECT_TRUE(c.training.deterministic);
  EXPECT_EQ(c.training.dataset_path, "data/x.jsonl");
  EXPECT_EQ(c.optimizer.betas, (std::vector<double>{0.8, 1.0}));
  EXPECT_EQ(c.optimizer.param_groups, (std::vector<std::string>{"*.bias=0", "*=0.1"}));
  // Untouched fields keep their values.
  TrainerConfig expected;
  expected.training.steps = 100;
  expected.training.max_norm = 2.0;
  expected.training.deterministic = true;
  expected.training.dataset_path = "data/x.jsonl";
  expected.optimizer.betas = {0.8, 1.0};
  expected.optimizer.param_groups = {"*.bias=0", "*=0.1"};
  EXPECT_EQ(flatten(c), flatten(expected));
}

TEST(TomlOverlay, EmptyArrayClearsAList) {
  TrainerConfig c;
  apply_toml_text(c, "[optimizer]\nbetas = []\n", "job.toml");
  EXPECT_TRUE(c.optimizer.betas.empty());
}

// A dataset list may be written as an array of its entries: it becomes the one string the
// command line takes, which prints and reads back unchanged.
TEST(TomlOverlay, DatasetPathTakesAnArrayOfEntries) {
  TrainerConfig c;
  apply_toml_text(c, R"(
[training]
dataset_path = ["a.jsonl:0.7", "shards/c.json:0.3"]
[validator]
dataset_path = ["held/*.jsonl"]
)",
                  "job.toml");
  EXPECT_EQ(c.training.dataset_path, "a.jsonl:0.7,shards/c.json:0.3");
  EXPECT_EQ(c.validator.dataset_path, "held/*.jsonl");
  TrainerConfig reread;
  apply_toml_text(reread, to_toml(c), "printed.toml");
  EXPECT_EQ(flatten(reread), flatten(c));

  auto message =
      error_of([&] { apply_toml_text(c, "[training]\ndataset_path = []\n", "job.toml"); });
  EXPECT_CONTAINS(message, "training.dataset_path: the dataset list is empty");
  message =
      error_of([&] { apply_toml_text(c, "[training]\ndataset_path = [\"a\", 1]\n", "job.toml"); });
  EXPECT_CONTAINS(message, "training.dataset_path[1]: expected a string, got integer 1");
  message =
      error_of([&] { apply_toml_text(c, "[training]\ndataset_path = [\"a,b\"]\n", "job.toml"); });
  EXPECT_CONTAINS(message, "training.dataset_path[0]: \"a,b\" holds a ','");
  // Other string fields still take only a string.
  message = error_of([&] { apply_toml_text(c, "[job]\ndump_folder = [\"x\"]\n", "job.toml"); });
  EXPECT_CONTAINS(message, "job.dump_folder: expected a string, got an array");
}

TEST(TomlOverlay, WrongTypeNamesFileLineKeyAndValue) {
  TrainerConfig c;
  auto message =
      error_of([&] { apply_toml_text(c, "[training]\n\nsteps = \"ten\"\n", "job.toml"); });
  EXPECT_CONTAINS(message, "config file job.toml, line 3");
  EXPECT_CONTAINS(message, "training.steps: expected an integer, got string \"ten\"");

  message = error_of([&] { apply_toml_text(c, "[training]\nsteps = 1.5\n", "job.toml"); });
  EXPECT_CONTAINS(message, "training.steps: expected an integer, got float 1.5");
  message = error_of([&] { apply_toml_text(c, "[checkpoint]\nenable = 1\n", "job.toml"); });
  EXPECT_CONTAINS(message, "checkpoint.enable: expected a boolean, got integer 1");
  message = error_of([&] { apply_toml_text(c, "[optimizer]\nlr = \"fast\"\n", "job.toml"); });
  EXPECT_CONTAINS(message, "optimizer.lr: expected a number, got string \"fast\"");
  message = error_of([&] { apply_toml_text(c, "[job]\ndump_folder = 3\n", "job.toml"); });
  EXPECT_CONTAINS(message, "job.dump_folder: expected a string, got integer 3");
  message = error_of([&] { apply_toml_text(c, "[optimizer]\nbetas = 0.9\n", "job.toml"); });
  EXPECT_CONTAINS(message, "optimizer.betas: expected a list of numbers, got float 0.9");
  message =
      error_of([&] { apply_toml_text(c, "[optimizer]\nbetas = [0.9, \"x\"]\n", "job.toml"); });
  EXPECT_CONTAINS(message, "optimizer.betas[1]: expected a number, got string \"x\"");
  message = error_of(
      [&] { apply_toml_text(c, "[optimizer]\nparam_groups = [\"a=1\", 2]\n", "job.toml"); });
  EXPECT_CONTAINS(message, "optimizer.param_groups[1]: expected a string, got integer 2");
  message = error_of([&] { apply_toml_text(c, "[training.steps]\nx = 1\n", "job.toml"); });
  EXPECT_CONTAINS(message, "training.steps: expected an integer, got a table");
}

TEST(TomlOverlay, UnknownSectionAndKeyNameThemAndListTheAccepted) {
  TrainerConfig c;
  auto message = error_of([&] { apply_toml_text(c, "[trainer]\nsteps = 1\n", "job.toml"); });
  EXPECT_CONTAINS(message, "config file job.toml, line 1");
  EXPECT_CONTAINS(message, "unknown config section \"trainer\"");
  EXPECT_CONTAINS(message, "accepted sections: job, model, lora, training");

  message = error_of([&] { apply_toml_text(c, "[training]\nstepz = 1\n", "job.toml"); });
  EXPECT_CONTAINS(message, "config file job.toml, line 2");
  EXPECT_CONTAINS(message, "unknown config key \"stepz\" in section [training]");
  EXPECT_CONTAINS(message, "accepted keys: steps, local_batch_size");

  message = error_of([&] { apply_toml_text(c, "steps = 1\n", "job.toml"); });
  EXPECT_CONTAINS(message, "unknown config section \"steps\"");
  message = error_of([&] { apply_toml_text(c, "training = 1\n", "job.toml"); });
  EXPECT_CONTAINS(message, "\"training\" must be a [training] table");
}

TEST(TomlOverlay, SyntaxErrorNamesFileAndLine) {
  TrainerConfig c;
  const auto message = error_of(
      [&] { apply_toml_text(c, "[training]\nsteps = 1\nseq_len = = 2\n", "broken.toml"); });
  EXPECT_CONTAINS(message, "config file broken.toml, line 3");
  EXPECT_CONTAINS(message, "TOML syntax error");
}

// Found by the config fuzz target: toml++ asserted on a table header starting with a
// character no key can start with; it must be a syntax error naming the line.
TEST(TomlOverlay, BadTableHeaderCharactersAreSyntaxErrors) {
  for (const std::string text :
       {"[training]\n[%n = 64\n", "[training]\n[\x16tCa\xd7]\n", "[training]\n[[%]]\n"}) {
    TrainerConfig c;
    const auto message = error_of([&] { apply_toml_text(c, text, "bad.toml"); });
    EXPECT_CONTAINS(message, "config file bad.toml, line 2");
    EXPECT_CONTAINS(message, "TOML syntax error");
  }
  // Found next: toml++ reached __builtin_unreachable on some non-ASCII characters between
  // tokens; they are only allowed in strings and comments.
  for (const std::string text :
       {"[training]\nstep \xc7\xbe = 1\n", "[training]\nsteps\xc3\xa9 = 1\n"}) {
    TrainerConfig c;
    const auto message = error_of([&] { apply_toml_text(c, text, "bad.toml"); });
    EXPECT_CONTAINS(message, "config file bad.toml, line 2, column 6");
    EXPECT_CONTAINS(message, "non-ASCII character outside a string or comment");
  }
  // UTF-8 in the four string forms (quotes next to the closing ones too) and in comments.
  TrainerConfig multi;
  apply_toml_text(multi,
                  "# \xc3\xa9\n[job]\ndescription = \"\"\"a\xc3\xa9\"\"\"\"\" # \xc3\xa9\n"
                  "[model]\nname = '''\xc3\xa9'''\nflavor = '\xc3\xa9\"'\n"
                  "[metrics]\nsave_tb_folder = \"\\\"\xc3\xa9\"\n",
                  "multi.toml");
  EXPECT_EQ(multi.job.description, "a\xc3\xa9\"\"");
  EXPECT_EQ(multi.model.name, "\xc3\xa9");
  EXPECT_EQ(multi.model.flavor, "\xc3\xa9\"");
  EXPECT_EQ(multi.metrics.save_tb_folder, "\"\xc3\xa9");
  // Tabs, CRLF line ends and UTF-8 in strings and comments stay accepted.
  TrainerConfig c;
  apply_toml_text(c, "[job]\r\n\tdescription = \"caf\xc3\xa9 \xf0\x9f\x98\x80\" # \xe4\xb8\xad\r\n",
                  "ok.toml");
  EXPECT_EQ(c.job.description, "caf\xc3\xa9 \xf0\x9f\x98\x80");
}

TEST(TomlOverlay, ReadsFilesAndNamesMissingOnes) {
  TrainerConfig c;
  apply_toml_file(c, write_temp("overlay_ok.toml", "[metrics]\nlog_freq = 5\n"));
  EXPECT_EQ(c.metrics.log_freq, 5);

  const std::string missing = (std::filesystem::path(::testing::TempDir()) / "nope.toml").string();
  auto message = error_of([&] { apply_toml_file(c, missing); });
  EXPECT_CONTAINS(message, "config file " + missing + ": no such file");
  message = error_of([&] { apply_toml_file(c, ::testing::TempDir()); });
  EXPECT_CONTAINS(message, "not a file");

  const std::string bad = write_temp("overlay_bad.toml", "[metrics]\nlog_freq = \"x\"\n");
  message = error_of([&] { apply_toml_file(c, bad); });
  EXPECT_CONTAINS(message, "config file " + bad + ", line 2: metrics.log_freq");
}

}  // namespace
}  // namespace titan::config
