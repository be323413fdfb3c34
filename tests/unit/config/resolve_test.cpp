// Resolving command lines: config function, then config files, then overrides in order.
#include "titan/config/resolve.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "config_test_util.h"

namespace titan::config {
namespace {

using testing::error_of;
using testing::flatten;

ConfigRegistry test_registry() {
  ConfigRegistry registry;
  registry.add(
      "toy", "small",
      [] {
        TrainerConfig c;
        c.training.steps = 5;
        c.model.flavor = "toy-small";
        return c;
      },
      "a small toy");
  registry.add(
      "toy", "large",
      [] {
        TrainerConfig c;
        c.training.steps = 500;
        return c;
      },
      "a large toy");
  registry.add(
      "other", "only", [] { return TrainerConfig{}; }, "the only one");
  return registry;
}

std::string write_temp(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::path(::testing::TempDir()) / name;
  std::ofstream(path) << text;
  return path.string();
}

class Resolve : public ::testing::Test {
 protected:
  ResolvedCommandLine resolve(const std::vector<std::string>& args,
                              std::vector<std::string> extra_flags = {}) {
    ResolveOptions options;
    options.registry = &registry_;
    options.extra_flags = std::move(extra_flags);
    return resolve_command_line(args, options);
  }
  std::string error(const std::vector<std::string>& args) {
    return error_of([&] { resolve(args); });
  }
  ConfigRegistry registry_ = test_registry();
};

TEST_F(Resolve, StartsFromTheNamedConfigFunction) {
  const auto r = resolve({"--module", "toy", "--config", "small"});
  EXPECT_EQ(r.module, "toy");
  EXPECT_EQ(r.config_name, "small");
  EXPECT_EQ(r.config.training.steps, 5);
  EXPECT_EQ(r.config.model.flavor, "toy-small");
  EXPECT_FALSE(r.print);
  const auto equals = resolve({"--module=toy", "--config=large"});
  EXPECT_EQ(equals.config.training.steps, 500);
}

TEST_F(Resolve, AppliesFileThenOverridesInOrder) {
  const std::string file =
      write_temp("resolve_order.toml", "[training]\nsteps = 77\nseq_len = 64\n");
  // The override comes before --config-file on the command line but still wins over it;
  // a key given twice takes the last value.
  const auto r =
      resolve({"--training.steps", "9", "--module", "toy", "--config", "small", "--config-file",
               file, "--training.steps=11", "--metrics.log_freq", "3", "--metrics.log_freq", "4"});
  EXPECT_EQ(r.config.training.steps, 11);
  EXPECT_EQ(r.config.training.seq_len, 64);
  EXPECT_EQ(r.config.metrics.log_freq, 4);
  EXPECT_EQ(r.config_files, std::vector<std::string>{file});
  EXPECT_EQ(r.config.model.flavor, "toy-small");

  const auto file_only = resolve({"--module", "toy", "--config", "small", "--config-file", file});
  EXPECT_EQ(file_only.config.training.steps, 77);
}

TEST_F(Resolve, BooleansTakeBareFlagsAndExplicitValues) {
  auto r = resolve({"--module", "toy", "--config", "small", "--checkpoint.enable",
                    "--training.deterministic", "true", "--checkpoint.last_save_in_hf"});
  EXPECT_TRUE(r.config.checkpoint.enable);
  EXPECT_TRUE(r.config.training.deterministic);
  EXPECT_TRUE(r.config.checkpoint.last_save_in_hf);
  r = resolve({"--module", "toy", "--config", "small", "--checkpoint.initial_load_model_only",
               "false", "--checkpoint.enable=true"});
  EXPECT_FALSE(r.config.checkpoint.initial_load_model_only);
  EXPECT_TRUE(r.config.checkpoint.enable);
  EXPECT_CONTAINS(error({"--module", "toy", "--config", "small", "--checkpoint.enable=yes"}),
                  "--checkpoint.enable: expected true or false, got \"yes\"");
}

TEST_F(Resolve, ABooleanFollowedByAnotherWordNamesTheKey) {
  // Not a stray "maybe": the value the user meant for --checkpoint.enable.
  EXPECT_CONTAINS(error({"--module", "toy", "--config", "small", "--checkpoint.enable", "maybe"}),
                  "--checkpoint.enable: expected true or false, got \"maybe\"");
  // The next option is not taken as the value.
  const auto r = resolve(
      {"--module", "toy", "--config", "small", "--checkpoint.enable", "--training.steps", "3"});
  EXPECT_TRUE(r.config.checkpoint.enable);
  EXPECT_EQ(r.config.training.steps, 3);
}

TEST_F(Resolve, JobConfigFileIsTheConfigFile) {
  const std::string file = write_temp("alias.toml", "[training]\nsteps = 41\n");
  const auto alias = resolve({"--module", "toy", "--config", "small", "--job.config_file", file});
  const auto plain = resolve({"--module", "toy", "--config", "small", "--config-file=" + file});
  EXPECT_EQ(alias.config.training.steps, 41);
  EXPECT_EQ(flatten(alias.config), flatten(plain.config));
  EXPECT_EQ(alias.config_files, std::vector<std::string>{file});
}

TEST_F(Resolve, RecordsTheKeysTheUserGave) {
  const std::string file = write_temp("given.toml", "[training]\nseq_len = 64\n");
  const auto r = resolve({"--module", "toy", "--config", "small", "--config-file", file,
                          "--optimizer.lr", "0.1", "--checkpoint.enable"});
  EXPECT_EQ(r.given_keys,
            (std::set<std::string>{"training.seq_len", "optimizer.lr", "checkpoint.enable"}));
}

TEST_F(Resolve, NegativeNumbersAndEmptyListsAreValues) {
  const auto r =
      resolve({"--module", "toy", "--config", "small", "--lr_scheduler.total_steps", "-1",
               "--optimizer.param_groups", "", "--training.global_batch_size", "16"});
  EXPECT_EQ(r.config.lr_scheduler.total_steps, -1);
  EXPECT_TRUE(r.config.optimizer.param_groups.empty());
  EXPECT_EQ(r.config.training.global_batch_size, 16);
}

TEST_F(Resolve, ReturnsAcceptedFlagsSeparately) {
  const auto r = resolve({"--print", "--module", "toy", "--config", "small"}, {"--print"});
  EXPECT_TRUE(r.print);
  EXPECT_EQ(r.flags.count("--print"), 1u);
  EXPECT_CONTAINS(error({"--print", "--module", "toy", "--config", "small"}),
                  "unknown option \"--print\"");
  EXPECT_CONTAINS(error({"stray", "--module", "toy", "--config", "small"}),
                  "unexpected argument \"stray\"");
}

TEST_F(Resolve, MissingOrUnknownModuleAndConfigListTheAccepted) {
  auto message = error({"--config", "small"});
  EXPECT_CONTAINS(message, "--module is required");
  EXPECT_CONTAINS(message, "other, toy");
  message = error({"--module", "toy"});
  EXPECT_CONTAINS(message, "--config is required");
  EXPECT_CONTAINS(message, "small, large");
  message = error({"--module", "toyz", "--config", "small"});
  EXPECT_CONTAINS(message,
                  "unknown module \"toyz\" (did you mean \"toy\"?); accepted modules: other, toy");
  EXPECT_CONTAINS(error({"--module", "toy", "--config", "smal"}),
                  "unknown config \"smal\" in module toy (did you mean \"small\"?)");
  message = error({"--module", "toy", "--config", "medium"});
  EXPECT_CONTAINS(message,
                  "unknown config \"medium\" in module toy; accepted configs: small, large");
  EXPECT_CONTAINS(error({"--module", "toy", "--config"}), "--config needs a value");
}

TEST_F(Resolve, WithoutRequirementStartsFromDefaults) {
  ResolveOptions options;
  options.registry = &registry_;
  options.require_config_function = false;
  const auto r = resolve_command_line({"--training.steps", "3"}, options);
  TrainerConfig expected;
  expected.training.steps = 3;
  EXPECT_EQ(flatten(r.config), flatten(expected));
  EXPECT_TRUE(r.module.empty());
}

TEST_F(Resolve, UnknownKeysAndWrongTypesNameTheKey) {
  auto message = error({"--module", "toy", "--config", "small", "--training.stepz", "3"});
  EXPECT_CONTAINS(message, "--training.stepz: unknown config key \"stepz\" in section [training]");
  EXPECT_CONTAINS(message, "accepted keys: steps, local_batch_size");
  message = error({"--module", "toy", "--config", "small", "--trainin.steps", "3"});
  EXPECT_CONTAINS(message, "unknown config section \"trainin\"");
  message = error({"--module", "toy", "--config", "small", "--training.steps", "1.5"});
  EXPECT_CONTAINS(message, "--training.steps: expected an integer, got \"1.5\"");
  message = error({"--module", "toy", "--config", "small", "--training.steps"});
  EXPECT_CONTAINS(message, "--training.steps needs a value");
  message = error({"--module", "toy", "--config", "small", "--config-file", "/no/such.toml"});
  EXPECT_CONTAINS(message, "config file /no/such.toml: no such file");
}

TEST_F(Resolve, ValidatesTheResult) {
  auto message = error({"--module", "toy", "--config", "small", "--training.steps", "0"});
  EXPECT_CONTAINS(message, "training.steps = 0: must be >= 1");
  message = error({"--module", "toy", "--config", "small", "--training.dtype", "float16"});
  EXPECT_CONTAINS(message, "training.dtype = \"float16\": accepted values are float32, bfloat16");
  ResolveOptions options;
  options.registry = &registry_;
  options.validate = false;
  EXPECT_EQ(resolve_command_line({"--module", "toy", "--config", "small", "--training.steps", "0"},
                                 options)
                .config.training.steps,
            0);
}

TEST(ConfigRegistry, RejectsDuplicatesAndKeepsRegistrationOrder) {
  ConfigRegistry registry = test_registry();
  EXPECT_CONTAINS(error_of([&] {
                    registry.add(
                        "toy", "small", [] { return TrainerConfig{}; }, "");
                  }),
                  "toy/small is registered twice");
  ASSERT_EQ(registry.functions("toy").size(), 2u);
  EXPECT_EQ(registry.functions("toy")[0].name, "small");
  EXPECT_EQ(registry.functions("toy")[1].description, "a large toy");
  EXPECT_EQ(registry.modules(), (std::vector<std::string>{"other", "toy"}));
  EXPECT_TRUE(registry.has("toy", "large"));
  EXPECT_FALSE(registry.has("toy", "medium"));
  EXPECT_CONTAINS(error_of([&] { ConfigRegistry{}.functions("x"); }), "no modules are registered");
}

}  // namespace
}  // namespace titan::config
