// The start-up cache of a parsed tokenizer.json (tokenizer_cache.h): used when fresh, rebuilt when
// tokenizer.json changes or the cache is damaged, and never a cause of different ids.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "test_helpers.h"
#include "titan/data/tokenizer/tokenizer_cache.h"

namespace titan::data {
namespace {

namespace fs = std::filesystem;

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_all(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

const std::vector<std::string>& texts() {
  static const std::vector<std::string> t = {
      "def f(x):\n    return x ** 2  # square\n", "Hello, world! don't 1234567",
      "中文 😀 café e\u0301", "<|im_start|>user\nhi<|im_end|>\n\n\t  ", "<|endoftext|>"};
  return t;
}

std::vector<std::vector<int32_t>> encode_all(const Tokenizer& tok) {
  std::vector<std::vector<int32_t>> ids;
  for (const auto& t : texts()) ids.push_back(tok.encode(t));
  return ids;
}

// A copy of Qwen3's tokenizer.json in a fresh folder.
class TokenizerCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    source_ = read_all(testing::tokenizer_dir() + "/tokenizer.json");
    file_ = std::make_unique<testing::TempFile>("tokenizer.json", source_);
    cache_ = tokenizer_cache_path(file_->path());
  }
  std::string source_, cache_;
  std::unique_ptr<testing::TempFile> file_;
};

TEST_F(TokenizerCacheTest, WrittenOnFirstLoadAndGivesTheSameIds) {
  const auto reference = encode_all(*testing::qwen3_tokenizer());
  const auto uncached = Tokenizer::from_directory(file_->dir().string(), false);
  EXPECT_FALSE(fs::exists(cache_));
  EXPECT_EQ(encode_all(uncached), reference);
  const auto first = Tokenizer::from_directory(file_->dir().string());
  ASSERT_TRUE(fs::exists(cache_));
  const auto cached = Tokenizer::from_directory(file_->dir().string());
  EXPECT_EQ(encode_all(first), reference);
  EXPECT_EQ(encode_all(cached), reference);
  EXPECT_EQ(cached.vocab_size(), uncached.vocab_size());
  EXPECT_EQ(cached.token_to_id("<|im_end|>"), uncached.token_to_id("<|im_end|>"));
}

TEST_F(TokenizerCacheTest, StaleCacheIsRebuilt) {
  Tokenizer::from_directory(file_->dir().string());
  const std::string old_cache = read_all(cache_);
  // Rename an added token: ids of text holding the old or new name change.
  std::string edited = source_;
  for (size_t at; (at = edited.find("<|endoftext|>")) != std::string::npos;) {
    edited.replace(at, 13, "<|end_of_txt|>");
  }
  write_all(file_->path(), edited);
  const auto tok = Tokenizer::from_directory(file_->dir().string());
  EXPECT_NE(read_all(cache_), old_cache);
  EXPECT_EQ(tok.encode("<|end_of_txt|>"), std::vector<int32_t>{151643});
  EXPECT_GT(tok.encode("<|endoftext|>").size(), 1u);
  EXPECT_EQ(encode_all(tok), encode_all(Tokenizer::from_directory(file_->dir().string(), false)));
}

TEST_F(TokenizerCacheTest, DamagedCacheIsIgnoredAndRebuilt) {
  Tokenizer::from_directory(file_->dir().string());
  const std::string good = read_all(cache_);
  const auto reference = encode_all(*testing::qwen3_tokenizer());
  std::string flipped = good;
  flipped[flipped.size() / 2] ^= 0x40;  // inside the vocabulary
  for (const std::string& bad :
       {good.substr(0, good.size() / 2), good.substr(0, 5), std::string(), flipped, good + "x"}) {
    EXPECT_FALSE([&] {
      TokenizerJson out;
      return decode_tokenizer_cache(bad, source_, out);
    }());
    write_all(cache_, bad);
    EXPECT_EQ(encode_all(Tokenizer::from_directory(file_->dir().string())), reference);
    EXPECT_EQ(read_all(cache_), good);  // rewritten whole
  }
}

TEST_F(TokenizerCacheTest, CacheOfOtherBytesIsNotUsed) {
  TokenizerJson parsed;
  parsed.rest = {{"model", {{"type", "BPE"}}}};
  const std::string bytes = encode_tokenizer_cache(parsed, "abc");
  TokenizerJson out;
  EXPECT_TRUE(decode_tokenizer_cache(bytes, "abc", out));
  EXPECT_FALSE(decode_tokenizer_cache(bytes, "abd", out));
  EXPECT_FALSE(decode_tokenizer_cache(bytes, "abcd", out));
}

}  // namespace
}  // namespace titan::data
