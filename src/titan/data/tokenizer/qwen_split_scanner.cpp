#include "titan/data/tokenizer/qwen_split_scanner.h"

#include <array>
#include <cstdint>

namespace titan::data {

const std::string_view kQwenSplitPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

namespace {

// Classes of a byte as the pattern sees it. \s is White_Space (the pre-tokenizer spells it out
// that way for PCRE2), which in ASCII is \t \n \v \f \r and space. Any byte >= 0x80 is kOther:
// part of a character the scanner does not judge.
enum Class : uint8_t { kLetter, kDigit, kSpace, kNewline, kPunct, kOther };

constexpr std::array<uint8_t, 256> make_classes() {
  std::array<uint8_t, 256> t{};
  for (int b = 0; b < 256; ++b) {
    if (b >= 0x80) {
      t[b] = kOther;
    } else if ((b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z')) {
      t[b] = kLetter;
    } else if (b >= '0' && b <= '9') {
      t[b] = kDigit;
    } else if (b == '\r' || b == '\n') {
      t[b] = kNewline;
    } else if ((b >= '\t' && b <= '\r') || b == ' ') {
      t[b] = kSpace;
    } else {
      t[b] = kPunct;  // ASCII punctuation, symbols and the other control characters
    }
  }
  return t;
}
constexpr std::array<uint8_t, 256> kClasses = make_classes();

// A class past the end of the text, distinct from every byte's.
constexpr uint8_t kEnd = 0xFF;

struct Text {
  std::string_view s;
  uint8_t at(size_t i) const { return i < s.size() ? kClasses[static_cast<uint8_t>(s[i])] : kEnd; }
  char lower(size_t i) const {
    const char c = i < s.size() ? s[i] : '\0';
    return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
  }
  // End of the run of bytes of class `c` (or of either class) starting at i.
  size_t run(size_t i, uint8_t c) const {
    while (at(i) == c) ++i;
    return i;
  }
  size_t space_run(size_t i) const {
    while (at(i) == kSpace || at(i) == kNewline) ++i;
    return i;
  }
};

// (?i:'s|'t|'re|'ve|'m|'ll|'d) at an apostrophe: the match end, kNoMatch, or 0 when a non-ASCII
// character decides (U+017F LATIN SMALL LETTER LONG S matches 's' caselessly).
constexpr size_t kNoMatch = static_cast<size_t>(-1);
size_t contraction(const Text& t, size_t pos) {
  if (t.at(pos + 1) == kOther) return 0;
  switch (t.lower(pos + 1)) {
    case 's':
    case 't':
    case 'm':
    case 'd':
      return pos + 2;
    case 'r':
    case 'v':
    case 'l': {
      if (t.at(pos + 2) == kOther) return 0;
      const char want = t.lower(pos + 1) == 'l' ? 'l' : 'e';
      return t.lower(pos + 2) == want ? pos + 3 : kNoMatch;
    }
    default:
      return kNoMatch;
  }
}

}  // namespace

size_t qwen_split_match_ascii(std::string_view s, size_t pos) {
  const Text t{s};
  const uint8_t c = t.at(pos);
  if (c == kOther) return 0;
  // 1. Contractions.
  if (s[pos] == '\'') {
    const size_t end = contraction(t, pos);
    if (end != kNoMatch) return end;
  }
  // 2. [^\r\n\p{L}\p{N}]?\p{L}+ : letters, maybe after one space or punctuation character.
  if (c == kLetter) {
    const size_t end = t.run(pos, kLetter);
    return t.at(end) == kOther ? 0 : end;
  }
  if (c == kSpace || c == kPunct) {
    const uint8_t next = t.at(pos + 1);
    if (next == kOther) return 0;
    if (next == kLetter) {
      const size_t end = t.run(pos + 1, kLetter);
      return t.at(end) == kOther ? 0 : end;
    }
  }
  // 3. \p{N} : one digit.
  if (c == kDigit) return pos + 1;
  // 4. ' ?[^\s\p{L}\p{N}]+[\r\n]*' : punctuation, maybe after one space, then newlines.
  size_t punct = kNoMatch;
  if (c == kPunct) punct = pos;
  if (s[pos] == ' ' && t.at(pos + 1) == kPunct) punct = pos + 1;
  if (punct != kNoMatch) {
    const size_t end = t.run(punct, kPunct);
    if (t.at(end) == kOther) return 0;
    size_t stop = end;
    while (t.at(stop) == kNewline) ++stop;
    return stop;
  }
  // Only white space is left (a space before a non-ASCII character returned 0 above).
  const size_t end = t.space_run(pos);
  if (t.at(end) == kOther) return 0;  // U+00A0 and others extend the run
  // 5. \s*[\r\n]+ : up to the last newline of the run.
  for (size_t i = end; i > pos; --i) {
    if (t.at(i - 1) == kNewline) return i;
  }
  // 6. \s+(?!\S) : the run, less its last character when something other than space follows;
  // 7. \s+ : a single space before such a character.
  if (end == s.size() || end - pos == 1) return end;
  return end - 1;
}

}  // namespace titan::data
