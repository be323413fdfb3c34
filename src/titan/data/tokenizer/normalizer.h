// The "normalizer" section of tokenizer.json: Unicode normalization (NFC for Qwen3) applied to the
// text between added tokens, before pre-tokenization. Implemented with utf8proc.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace titan::data {

class Normalizer {
 public:
  // Accepts null, NFC, NFD, NFKC, NFKD and a Sequence of those; anything else is an error that
  // names `file` and the normalizer type.
  static Normalizer from_json(const nlohmann::json& j, const std::string& file);

  // True when normalization is the identity on every input (no normalizer).
  bool is_identity() const { return forms_.empty(); }

  // Normalizes valid UTF-8 `in`. Returns a view of `in` itself when nothing can change (the
  // common case: pure ASCII, or for NFC anything below U+0300), else a view of `storage`.
  std::string_view apply(std::string_view in, std::string& storage) const;

 private:
  enum class Form { kNFC, kNFD, kNFKC, kNFKD };
  std::vector<Form> forms_;
};

}  // namespace titan::data
