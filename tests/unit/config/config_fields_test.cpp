// Generic field access over the visit() lists: names, CLI setting, printing, and that the
// printed TOML reads back to the same config.
#include "titan/config/config_fields.h"

#include <gtest/gtest.h>

#include <type_traits>

#include "config_test_util.h"
#include "titan/config/toml_overlay.h"

namespace titan::config {
namespace {

using testing::error_of;
using testing::flatten;

// Every field changed from its default, strings with characters TOML must escape.
TrainerConfig every_field_changed() {
  TrainerConfig config;
  int counter = 0;
  auto on_section = [&](const char*, auto& fields) {
    auto on_field = [&](const char*, auto& value, const char*) {
      using T = std::decay_t<decltype(value)>;
      ++counter;
      if constexpr (std::is_same_v<T, int64_t>) {
        value = value * 3 + 7 + counter;
      } else if constexpr (std::is_same_v<T, double>) {
        value = value * 1.37 + 0.123 + 1.0 / (counter + 2);
      } else if constexpr (std::is_same_v<T, bool>) {
        value = !value;
      } else if constexpr (std::is_same_v<T, std::string>) {
        value += " \"quoted\" back\\slash\ttab\nnewline é #" + std::to_string(counter);
      } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
        value = {"a=1", "b, with comma", std::to_string(counter)};
      } else {
        value = {0.1, 1.0 / 3.0, 1e-12 * counter};
      }
    };
    fields.visit(on_field);
  };
  config.visit_sections(on_section);
  return config;
}

TEST(ConfigFields, ListsSectionsAndKeysInVisitOrder) {
  const auto sections = section_names();
  ASSERT_FALSE(sections.empty());
  EXPECT_EQ(sections.front(), "job");
  EXPECT_EQ(sections[2], "lora");  // the model converter's section follows the model's
  EXPECT_EQ(sections[3], "training");
  const auto keys = field_names("training");
  EXPECT_EQ(keys.front(), "steps");
  EXPECT_EQ(keys[1], "local_batch_size");
  size_t total = 0;
  for (const auto& s : sections) total += field_names(s).size();
  EXPECT_EQ(total, flatten(TrainerConfig{}).size());
}

TEST(ConfigFields, SetsEveryTypeFromStrings) {
  TrainerConfig c;
  set_field_from_string(c, "training", "steps", "123", "--training.steps");
  set_field_from_string(c, "optimizer", "lr", "2.5e-5", "--optimizer.lr");
  set_field_from_string(c, "checkpoint", "enable", "true", "--checkpoint.enable");
  set_field_from_string(c, "job", "dump_folder", "/tmp/x y", "--job.dump_folder");
  set_field_from_string(c, "optimizer", "betas", "0.8,0.9", "--optimizer.betas");
  set_field_from_string(c, "checkpoint", "exclude_from_loading", "optimizer,lr_scheduler",
                        "--checkpoint.exclude_from_loading");
  EXPECT_EQ(c.training.steps, 123);
  EXPECT_EQ(c.optimizer.lr, 2.5e-5);
  EXPECT_TRUE(c.checkpoint.enable);
  EXPECT_EQ(c.job.dump_folder, "/tmp/x y");
  EXPECT_EQ(c.optimizer.betas, (std::vector<double>{0.8, 0.9}));
  EXPECT_EQ(c.checkpoint.exclude_from_loading,
            (std::vector<std::string>{"optimizer", "lr_scheduler"}));
}

TEST(ConfigFields, UnknownSectionNamesItAndListsSections) {
  TrainerConfig c;
  const auto message =
      error_of([&] { set_field_from_string(c, "trainig", "steps", "1", "--trainig.steps"); });
  EXPECT_CONTAINS(message, "--trainig.steps");
  EXPECT_CONTAINS(message, "unknown config section \"trainig\"");
  EXPECT_CONTAINS(message, "did you mean \"training\"");
  EXPECT_CONTAINS(message, "job, model, lora, training, dpo, parallelism");
}

TEST(ConfigFields, UnknownKeyNamesItAndListsTheSectionsKeys) {
  TrainerConfig c;
  const auto message =
      error_of([&] { set_field_from_string(c, "training", "stepz", "1", "--training.stepz"); });
  EXPECT_CONTAINS(message, "unknown config key \"stepz\" in section [training]");
  EXPECT_CONTAINS(message, "did you mean \"steps\"");
  EXPECT_CONTAINS(message, "steps, local_batch_size, global_batch_size");
  EXPECT_EQ(
      error_of([&] { is_bool_field("training", "nope", "x"); }).find("nope") != std::string::npos,
      true);
}

TEST(ConfigFields, SplitsDottedKeys) {
  EXPECT_EQ(split_dotted_key("training.steps", "x"),
            (std::pair<std::string, std::string>{"training", "steps"}));
  for (const char* bad : {"training", ".steps", "training."}) {
    EXPECT_CONTAINS(error_of([&] { split_dotted_key(bad, "--x"); }), "section.key");
  }
}

TEST(ConfigFields, KnowsWhichFieldsAreBooleans) {
  EXPECT_TRUE(is_bool_field("checkpoint", "enable", "x"));
  EXPECT_TRUE(is_bool_field("training", "deterministic", "x"));
  EXPECT_FALSE(is_bool_field("training", "steps", "x"));
  EXPECT_FALSE(is_bool_field("job", "dump_folder", "x"));
}

TEST(ConfigFields, PrintsSectionsThenKeysInVisitOrder) {
  const std::string toml = to_toml(TrainerConfig{});
  EXPECT_EQ(toml.rfind("[job]\ndump_folder = \"./outputs\"\n", 0), 0u) << toml;
  EXPECT_CONTAINS(toml, "[training]\nsteps = 20\nlocal_batch_size = 8\n");
  EXPECT_CONTAINS(toml, "betas = [0.9, 0.95]\n");
  EXPECT_CONTAINS(toml, "param_groups = []\n");
  EXPECT_CONTAINS(toml, "decay_ratio = -1.0\n");
  EXPECT_LT(toml.find("[job]"), toml.find("[model]"));
  EXPECT_LT(toml.find("[checkpoint]"), toml.find("[debug]"));
}

TEST(ConfigFields, PrintedTomlReadsBackToTheSameConfig) {
  const TrainerConfig original = every_field_changed();
  ASSERT_NE(flatten(original), flatten(TrainerConfig{}));
  TrainerConfig reloaded;
  apply_toml_text(reloaded, to_toml(original), "printed.toml");
  EXPECT_EQ(flatten(reloaded), flatten(original));
  EXPECT_EQ(to_toml(reloaded), to_toml(original));
}

TEST(ConfigFields, PrintedDefaultsReadBackToDefaults) {
  TrainerConfig reloaded = every_field_changed();
  apply_toml_text(reloaded, to_toml(TrainerConfig{}), "defaults.toml");
  EXPECT_EQ(flatten(reloaded), flatten(TrainerConfig{}));
}

TEST(ConfigFields, EveryFieldHasADescription) {
  TrainerConfig config;
  std::vector<std::string> missing;
  auto on_section = [&](const char* section, auto& fields) {
    auto on_field = [&](const char* key, auto&, const char* description = "") {
      if (std::string(description).empty()) missing.push_back(std::string(section) + "." + key);
      EXPECT_EQ(std::string(description).find('\n'), std::string::npos) << key << ": one line";
    };
    fields.visit(on_field);
  };
  config.visit_sections(on_section);
  EXPECT_TRUE(missing.empty()) << "fields without a description in visit(): " << missing.size()
                               << ", the first " << (missing.empty() ? "" : missing.front());
  EXPECT_EQ(field_description("training", "steps"), "optimizer steps to train");
}

TEST(ConfigFields, DescriptionsAreCommentsAboveTheirKeysAndReadBack) {
  const TrainerConfig config = every_field_changed();
  const std::string text = to_toml(config, /*with_descriptions=*/true);
  EXPECT_CONTAINS(text, "# optimizer steps to train\nsteps = ");
  TrainerConfig back;
  apply_toml_text(back, text, "described.toml");
  EXPECT_EQ(flatten(back), flatten(config));
}

}  // namespace
}  // namespace titan::config
