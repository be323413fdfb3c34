// Command-line values of every field type, and TOML formatting of each.
#include "titan/config/field_values.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "config_test_util.h"

namespace titan::config {
namespace {

using testing::error_of;

TEST(FieldValues, ParsesIntegers) {
  int64_t v = 0;
  parse_cli_value("--a.b", "42", v);
  EXPECT_EQ(v, 42);
  parse_cli_value("--a.b", "-1", v);
  EXPECT_EQ(v, -1);
  parse_cli_value("--a.b", "9223372036854775807", v);
  EXPECT_EQ(v, std::numeric_limits<int64_t>::max());
}

TEST(FieldValues, RejectsNonIntegers) {
  for (const char* bad : {"1.5", "abc", "", "12abc", "1e3", " 3", "9223372036854775808"}) {
    int64_t v = 7;
    const std::string message = error_of([&] { parse_cli_value("--training.steps", bad, v); });
    EXPECT_CONTAINS(message, "--training.steps: expected an integer");
    EXPECT_CONTAINS(message, std::string("\"") + bad + "\"");
    EXPECT_EQ(v, 7) << "a failed parse must leave the field unchanged";
  }
}

TEST(FieldValues, ParsesDoubles) {
  double v = 0;
  parse_cli_value("--a.b", "1.5", v);
  EXPECT_EQ(v, 1.5);
  parse_cli_value("--a.b", "3e-4", v);
  EXPECT_EQ(v, 3e-4);
  parse_cli_value("--a.b", "2", v);
  EXPECT_EQ(v, 2.0);
  parse_cli_value("--a.b", "-0.25", v);
  EXPECT_EQ(v, -0.25);
  for (const char* bad : {"abc", "", "1.5x", "1,5"}) {
    EXPECT_CONTAINS(error_of([&] { parse_cli_value("--optimizer.lr", bad, v); }),
                    "--optimizer.lr: expected a number");
  }
}

TEST(FieldValues, ParsesBooleansStrictly) {
  bool v = false;
  parse_cli_value("--a.b", "true", v);
  EXPECT_TRUE(v);
  parse_cli_value("--a.b", "false", v);
  EXPECT_FALSE(v);
  for (const char* bad : {"1", "0", "yes", "True", ""}) {
    EXPECT_CONTAINS(error_of([&] { parse_cli_value("--checkpoint.enable", bad, v); }),
                    "--checkpoint.enable: expected true or false");
  }
}

TEST(FieldValues, ParsesStringsVerbatim) {
  std::string v;
  parse_cli_value("--a.b", " spaced, with comma ", v);
  EXPECT_EQ(v, " spaced, with comma ");
  parse_cli_value("--a.b", "", v);
  EXPECT_EQ(v, "");
}

// Found by the config fuzz target: such a value could be set but the config printed as TOML
// could not be read back.
TEST(FieldValues, StringsMustBeUtf8) {
  std::string v;
  std::vector<std::string> list;
  EXPECT_CONTAINS(error_of([&] {
                    parse_cli_value("--job.description",
                                    "ab\xee"
                                    "3",
                                    v);
                  }),
                  "--job.description: the value is not valid UTF-8 (byte 2)");
  EXPECT_CONTAINS(error_of([&] { parse_cli_value("--override.imports", "a=b,\xc3", list); }),
                  "--override.imports: the value is not valid UTF-8 (byte 4)");
  parse_cli_value("--job.description", "caf\xc3\xa9", v);
  EXPECT_EQ(v, "caf\xc3\xa9");
}

TEST(FieldValues, ParsesCommaSeparatedLists) {
  std::vector<double> numbers;
  parse_cli_value("--optimizer.betas", "0.9,0.95", numbers);
  EXPECT_EQ(numbers, (std::vector<double>{0.9, 0.95}));
  parse_cli_value("--optimizer.betas", "0.8, 0.99 ,1", numbers);
  EXPECT_EQ(numbers, (std::vector<double>{0.8, 0.99, 1.0}));
  parse_cli_value("--optimizer.betas", "", numbers);
  EXPECT_TRUE(numbers.empty());
  EXPECT_CONTAINS(error_of([&] { parse_cli_value("--optimizer.betas", "0.9,x", numbers); }),
                  "\"x\" is not a number");

  std::vector<std::string> names;
  parse_cli_value("--optimizer.param_groups", "*.bias=0,*=0.1", names);
  EXPECT_EQ(names, (std::vector<std::string>{"*.bias=0", "*=0.1"}));
  parse_cli_value("--optimizer.param_groups", "", names);
  EXPECT_TRUE(names.empty());
}

TEST(FieldValues, FormatsDoublesAsRoundTrippingFloats) {
  for (double v : {0.0, 1.0, -2.0, 0.1, 8e-4, 1e-8, 3e-4, 1.0 / 3.0, 1e300, 123456789.0}) {
    const std::string text = format_toml_value(v);
    EXPECT_NE(text.find_first_of(".e"), std::string::npos) << text << " would read as an integer";
    double back = 0;
    ASSERT_TRUE(parse_double(text, back)) << text;
    EXPECT_EQ(back, v) << text;
  }
  EXPECT_EQ(format_toml_value(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(format_toml_value(-std::numeric_limits<double>::infinity()), "-inf");
}

TEST(FieldValues, FormatsStringsAndLists) {
  EXPECT_EQ(format_toml_value(std::string("a\"b\\c\n")), "\"a\\\"b\\\\c\\n\"");
  EXPECT_EQ(format_toml_value(std::string("\x01")), "\"\\u0001\"");
  EXPECT_EQ(format_toml_value(std::vector<std::string>{}), "[]");
  EXPECT_EQ(format_toml_value(std::vector<std::string>{"x", "y"}), "[\"x\", \"y\"]");
  EXPECT_EQ(format_toml_value(std::vector<double>{0.9, 0.95}), "[0.9, 0.95]");
  EXPECT_EQ(format_toml_value(int64_t{-1}), "-1");
  EXPECT_EQ(format_toml_value(true), "true");
}

}  // namespace
}  // namespace titan::config
