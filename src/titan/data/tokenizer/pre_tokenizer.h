// The "pre_tokenizer" section of tokenizer.json: splits normalized text into pieces ("words")
// that BPE then encodes one by one. Supported: Split with a regex or string pattern and the
// Isolated behavior (Qwen3's), ByteLevel (its byte mapping is implicit here, since BPE runs on raw
// bytes; with use_regex it also splits with GPT-2's pattern), and Sequences of these.
// Regexes run on PCRE2 (JIT) with UTF and UCP, the closest peer of the Oniguruma engine that
// Hugging Face `tokenizers` uses.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace titan::data {

class SplitRegex;

// Per-call working memory for PreTokenizer::split, reused across calls by one thread.
struct PreTokenizerScratch {
  PreTokenizerScratch();
  ~PreTokenizerScratch();
  std::vector<std::string_view> pieces, next;
  struct Pcre;  // match data and an on-demand JIT stack
  std::unique_ptr<Pcre> pcre;
};

class PreTokenizer {
 public:
  // `scanner` = false runs every regex on PCRE2 alone (the reference that tests compare
  // qwen_split_scanner.h against).
  static PreTokenizer from_json(const nlohmann::json& j, const std::string& file,
                                bool scanner = true);
  PreTokenizer();
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;
  ~PreTokenizer();

  // Splits valid UTF-8 `text` into pieces (views of `text`) left in scratch.pieces.
  void split(std::string_view text, PreTokenizerScratch& scratch) const;

 private:
  std::vector<std::unique_ptr<SplitRegex>>
      regexes_;  // applied in order, each with Isolated behavior
};

}  // namespace titan::data
