// The subcommands' flag parsing (cli/flag_parser.h): values after the flag or after '=', boolean
// flags, numbers checked, and every mistake one error that names the subcommand and the flag
// (unknown flags list the accepted ones).
#include <gtest/gtest.h>

#include "error_of.h"
#include "titan/cli/flag_parser.h"

namespace titan::cli {
namespace {

using titan::testing::error_of;

TEST(FlagParser, ValuesBooleansAndDefaults) {
  const FlagParser flags({"--model", "m", "--steps=3", "--sft", "--dtype=bfloat16"}, "eval",
                         {"--model", "--steps", "--dtype", "--seq-len"}, {"--sft", "--chat"});
  EXPECT_EQ(flags.get("--model"), "m");
  EXPECT_EQ(flags.get_int("--steps", 1), 3);
  EXPECT_EQ(flags.get("--dtype"), "bfloat16");
  EXPECT_TRUE(flags.has("--sft"));
  EXPECT_EQ(flags.get("--sft"), "true");
  EXPECT_FALSE(flags.has("--chat"));
  EXPECT_EQ(flags.get_int("--seq-len", 512), 512);
  EXPECT_EQ(flags.get("--seq-len", "x"), "x");
  EXPECT_EQ(flags.require("--model"), "m");
}

TEST(FlagParser, MistakesAreOneErrorNamingTheFlag) {
  const std::string unknown = error_of([] {
    FlagParser({"--modle", "m"}, "eval", {"--model", "--steps"}, {"--sft"});
  });
  EXPECT_NE(unknown.find("titan eval: unknown argument '--modle'; accepted: --model --steps --sft"),
            std::string::npos)
      << unknown;
  const std::string missing = error_of([] { FlagParser({"--model"}, "eval", {"--model"}); });
  EXPECT_NE(missing.find("--model needs a value"), std::string::npos) << missing;
  const FlagParser flags({"--steps", "three", "--temperature", "hot"}, "generate",
                         {"--steps", "--temperature", "--prompt"});
  EXPECT_NE(error_of([&] {
              flags.get_int("--steps", 1);
            }).find("titan generate: --steps expects an integer, got 'three'"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              flags.get_double("--temperature", 1.0);
            }).find("--temperature expects a number, got 'hot'"),
            std::string::npos);
  EXPECT_NE(error_of([&] { flags.require("--prompt"); }).find("--prompt is required"),
            std::string::npos);
}

TEST(FlagParser, HelpAnywhere) {
  EXPECT_TRUE(wants_help({"--model", "m", "-h"}));
  EXPECT_TRUE(wants_help({"--help"}));
  EXPECT_FALSE(wants_help({"--model", "help"}));
}

}  // namespace
}  // namespace titan::cli
