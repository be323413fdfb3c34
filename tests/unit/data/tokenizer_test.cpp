// Tokenizer cases that need no Python peer (parity with HF `tokenizers` is checked by
// tests/integration/test_tokenizer_parity.py): round trips, lookups and error messages.
#include <gtest/gtest.h>

#include "test_helpers.h"
#include "titan/common/error.h"
#include "titan/data/tokenizer/byte_level.h"

namespace titan::data {
namespace {

using testing::qwen3_tokenizer;
using testing::TempFile;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const titan::Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Tokenizer, DecodeInvertsEncode) {
  const auto tok = qwen3_tokenizer();
  for (const std::string text : {"Hello, world!", "  spaces\n\n\ttabs", "中文 😀 café",
                                 "<|im_start|>user\nhi<|im_end|>", "don't 1234567"}) {
    EXPECT_EQ(tok->decode(tok->encode(text)), text);
  }
}

TEST(Tokenizer, AddedTokensAreSingleIds) {
  const auto tok = qwen3_tokenizer();
  const int32_t eos = tok->token_to_id("<|endoftext|>");
  EXPECT_EQ(eos,
            151643);  // the id docs/architecture.md and docs/qwen3.md give for Qwen3's end of text
  const auto ids = tok->encode("a<|endoftext|>b");
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids[1], eos);
  EXPECT_GT(tok->vocab_size(), eos);
}

TEST(Tokenizer, SameWordSameIdsWithCache) {
  const auto tok = qwen3_tokenizer();
  const auto once = tok->encode(" tokenization");
  EXPECT_EQ(tok->encode(" tokenization tokenization").size(), 2 * once.size());
  EXPECT_EQ(tok->encode(" tokenization"), once);
}

TEST(Tokenizer, ErrorsNameTheirSubject) {
  const auto tok = qwen3_tokenizer();
  EXPECT_NE(error_of([&] { tok->token_to_id("<|no_such_token|>"); }).find("<|no_such_token|>"),
            std::string::npos);
  EXPECT_NE(error_of([&] { tok->decode({1, 999999}); }).find("999999"), std::string::npos);
  EXPECT_NE(error_of([&] { tok->encode("bad \xff byte"); }).find("UTF-8"), std::string::npos);
  EXPECT_NE(
      error_of([] { Tokenizer::from_directory("/nonexistent/tok"); }).find("/nonexistent/tok"),
      std::string::npos);
  TempFile corrupt("tokenizer.json", "{\"model\": {\"type\": \"BPE\", \"vocab\": ");
  EXPECT_NE(
      error_of([&] { Tokenizer::from_directory(corrupt.dir().string()); }).find(corrupt.path()),
      std::string::npos);
}

TEST(ByteLevel, LossyUtf8ReplacesMaximalInvalidSubparts) {
  // Rust's from_utf8_lossy: "\xF0\x9F\x98" (a truncated 4-byte char) is one U+FFFD; a stray
  // continuation byte is another.
  EXPECT_EQ(utf8_lossy("a\xF0\x9F\x98"
                       "b\x80"),
            "a\xEF\xBF\xBD"
            "b\xEF\xBF\xBD");
  EXPECT_EQ(utf8_lossy("\xE4\xB8\xAD"), "\xE4\xB8\xAD");
  for (int b = 0; b < 256; ++b) {
    EXPECT_EQ(code_point_to_byte(byte_to_code_point(static_cast<uint8_t>(b))), b);
  }
}

}  // namespace
}  // namespace titan::data
