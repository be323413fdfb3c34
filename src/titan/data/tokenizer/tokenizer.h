// A Hugging Face `tokenizer.json` tokenizer for byte-level BPE models such as Qwen3. encode()
// gives exactly the ids of `tokenizers.Tokenizer.from_file(...).encode(text).ids`:
//   1. added tokens (<|im_start|>, <|endoftext|>, ...) are found in the raw text first;
//   2. the text between them is normalized (NFC), split by the pre-tokenizer regex (PCRE2),
//   3. and each piece is BPE-encoded on its bytes (results cached per piece).
// No BOS/EOS is added (Qwen3's post-processor adds none). Thread-safe: a const Tokenizer may
// encode and decode from several threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace titan::data {

class Tokenizer {
 public:
  // Reads DIR/tokenizer.json (or the file itself when `dir` names a file). Throws titan::Error
  // naming the file when it is missing, not JSON, or describes an unsupported tokenizer.
  // With `use_cache`, the parsed file is kept in a binary cache beside it (tokenizer_cache.h)
  // that later loads read instead of the JSON.
  static Tokenizer from_directory(const std::string& dir, bool use_cache = true);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Throws titan::Error when `text` is not valid UTF-8.
  std::vector<int32_t> encode(std::string_view text) const;
  // Appends to `out` instead of returning (avoids a copy when packing).
  void encode_into(std::string_view text, std::vector<int32_t>& out) const;

  // Text of `ids`, special tokens included (HF decode with skip_special_tokens=False); byte
  // sequences that are not valid UTF-8 become U+FFFD as in HF. An id outside the vocabulary is a
  // titan::Error naming it.
  std::string decode(const std::vector<int32_t>& ids) const;

  // Id of a token string (added tokens first, then the BPE vocabulary, whose tokens are written
  // in the byte-level alphabet, e.g. "Ġthe"). Throws titan::Error naming the token.
  int32_t token_to_id(const std::string& token) const;

  // Number of ids including added tokens (HF get_vocab_size(with_added_tokens=True)); 151669 for
  // Qwen3, whose models pad their embedding to 151936.
  int64_t vocab_size() const;

  // The tokenizer.json this was read from.
  const std::string& path() const;

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace titan::data
