// Added tokens (tokenizer.json "added_tokens", e.g. <|im_start|>, <|endoftext|>, <think>): found
// in the text before pre-tokenization, exactly as Hugging Face `tokenizers`' AddedVocabulary does.
// Tokens with normalized = false are matched in the raw text; the pieces between them are then
// normalized and searched for tokens with normalized = true. Matching is leftmost-longest, and the
// lstrip / rstrip / single_word flags are honoured.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace titan::data {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
  bool special = false;
};

// A piece of text: either an added token (id >= 0) or plain text to be tokenized (id == -1).
struct TextSegment {
  int32_t id;
  size_t begin, end;
};

class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  explicit AddedTokenMatcher(std::vector<AddedToken> tokens);

  bool empty() const { return tokens_.empty(); }

  // Splits `text` into segments covering it in order (an empty text gives none).
  void split(std::string_view text, std::vector<TextSegment>& out) const;

 private:
  std::vector<AddedToken> tokens_;
  // For each first byte, indices into tokens_ sorted longest first, so the first hit at a
  // position is the longest.
  std::array<std::vector<uint32_t>, 256> by_first_byte_;
  int only_first_byte_ = -1;  // the first byte of every token when they all share one
};

}  // namespace titan::data
