// A hand-written matcher for the pre-tokenizer regex of Qwen2, Qwen2.5 and Qwen3:
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|
//   \s*[\r\n]+|\s+(?!\S)|\s+
// PCRE2 pays a call and its set-up for every piece (about four bytes of code or prose), which
// made the regex most of the encoding time. Where every character the match depends on is ASCII
// the answer is plain byte tests; where a non-ASCII byte could change it (a letter, a space such
// as U+00A0, or U+017F that (?i) folds to 's'), the scanner says so and the caller asks PCRE2.
// tests/unit/data/qwen_split_scanner_test.cpp checks it against PCRE2 on random text.
#pragma once

#include <cstddef>
#include <string_view>

namespace titan::data {

// The pattern above exactly as tokenizer.json spells it (the "Regex" of its Split step).
extern const std::string_view kQwenSplitPattern;

// Where PCRE2's leftmost match of kQwenSplitPattern starting at text[pos] ends (> pos: this
// pattern matches at every position), or 0 when that depends on a non-ASCII character and only
// PCRE2 can tell. `pos` < text.size(); text is valid UTF-8.
size_t qwen_split_match_ascii(std::string_view text, size_t pos);

}  // namespace titan::data
