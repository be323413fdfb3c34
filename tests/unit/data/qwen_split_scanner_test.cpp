// The ASCII scanner of Qwen's pre-tokenizer regex (qwen_split_scanner.h) against PCRE2 running
// the same pattern: random texts built from pieces chosen to reach every alternative and every
// non-ASCII character the scanner must leave to PCRE2 must split identically.
#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "test_helpers.h"
#include "titan/data/tokenizer/pre_tokenizer.h"
#include "titan/data/tokenizer/qwen_split_scanner.h"

namespace titan::data {
namespace {

nlohmann::json qwen_pre_tokenizer_json() {
  return {{"type", "Sequence"},
          {"pretokenizers",
           {{{"type", "Split"},
             {"pattern", {{"Regex", std::string(kQwenSplitPattern)}}},
             {"behavior", "Isolated"},
             {"invert", false}},
            {{"type", "ByteLevel"},
             {"add_prefix_space", false},
             {"trim_offsets", false},
             {"use_regex", false}}}}};
}

std::vector<std::string> pieces(const PreTokenizer& p, std::string_view text) {
  PreTokenizerScratch scratch;
  p.split(text, scratch);
  return {scratch.pieces.begin(), scratch.pieces.end()};
}

TEST(QwenSplitScanner, PatternIsQwen3s) {
  // The scanner is used only when tokenizer.json spells the pattern exactly so; a Qwen
  // tokenizer that spelled it otherwise would silently lose the fast path.
  std::ifstream in(testing::tokenizer_dir() + "/tokenizer.json");
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"].get<std::string>(),
            kQwenSplitPattern);
}

TEST(QwenSplitScanner, SplitsLikePcre2) {
  const auto json = qwen_pre_tokenizer_json();
  const PreTokenizer fast = PreTokenizer::from_json(json, "test", true);
  const PreTokenizer pcre = PreTokenizer::from_json(json, "test", false);
  const std::vector<std::string> atoms = {"a",
                                          "Z",
                                          "hello",
                                          "World",
                                          " ",
                                          "  ",
                                          "\t",
                                          "\n",
                                          "\r",
                                          "\r\n",
                                          "\v",
                                          "\f",
                                          "'",
                                          "'s",
                                          "'S",
                                          "'t",
                                          "'re",
                                          "'RE",
                                          "'rE",
                                          "'ve",
                                          "'m",
                                          "'ll",
                                          "'Ll",
                                          "'d",
                                          "'x",
                                          "'r",
                                          "'l",
                                          "0",
                                          "9",
                                          "123",
                                          ".",
                                          "(",
                                          ")",
                                          "#",
                                          "_",
                                          "-",
                                          "\"",
                                          "!=",
                                          "\x01",
                                          "\x7f",
                                          "\x1f",
                                          "\u00e9",   // é: a non-ASCII letter
                                          "e\u0301",  // e + combining acute: a mark, not a letter
                                          "\u0301",   // a lone combining mark
                                          "\u017f",
                                          "'\u017f",
                                          "'r\u017f",
                                          "'l\u017f",  // long s, which (?i) folds to 's'
                                          "\u212a",    // Kelvin sign
                                          "\u00a0",
                                          "\u0085",
                                          "\u2028",
                                          "\u3000",
                                          "\u200b",
                                          "\u180e",  // spaces and non-spaces
                                          "\u4e2d\u6587",
                                          "\U0001F600",
                                          "\u0661",
                                          "\u2167",
                                          "\u00b9",
                                          "\u00b7",
                                          "\u01c5",
                                          "\u00ab",
                                          "\u2014",
                                          "\u00ad"};
  std::mt19937 rng(20261202);
  std::uniform_int_distribution<size_t> pick(0, atoms.size() - 1), count(1, 14);
  for (int i = 0; i < 30000; ++i) {
    std::string text;
    for (size_t n = count(rng); n > 0; --n) text += atoms[pick(rng)];
    ASSERT_EQ(pieces(fast, text), pieces(pcre, text)) << "text: " << nlohmann::json(text).dump();
  }
}

TEST(QwenSplitScanner, KnownSplits) {
  const PreTokenizer fast = PreTokenizer::from_json(qwen_pre_tokenizer_json(), "test", true);
  using V = std::vector<std::string>;
  EXPECT_EQ(pieces(fast, "don't  stop\n\n  x = 12;\r\n"),
            (V{"don", "'t", " ", " stop", "\n\n", " ", " x", " =", " ", "1", "2", ";\r\n"}));
  EXPECT_EQ(pieces(fast, "\tfoo(bar)  "), (V{"\tfoo", "(bar", ")", "  "}));
}

}  // namespace
}  // namespace titan::data
