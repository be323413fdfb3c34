#include "titan/data/tokenizer/added_tokens.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstring>

#include "titan/data/tokenizer/byte_level.h"

namespace titan::data {
namespace {

// Rust's char::is_whitespace (the White_Space property).
bool is_whitespace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

// A word character in the sense of a regex \w (letters, marks, decimal digits, connector
// punctuation), which is what `tokenizers` checks around single_word tokens.
bool is_word_character(char32_t c) {
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_PC:
      return true;
    default:
      return false;
  }
}

char32_t first_char(std::string_view s) {
  char32_t c = 0;
  decode_utf8(s, 0, &c);
  return c;
}

// The code point ending at s.end() and where it starts.
char32_t last_char(std::string_view s, size_t* start) {
  size_t i = s.size() - 1;
  while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
  *start = i;
  return first_char(s.substr(i));
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  for (uint32_t i = 0; i < tokens_.size(); ++i) {
    if (tokens_[i].content.empty()) continue;
    by_first_byte_[static_cast<unsigned char>(tokens_[i].content[0])].push_back(i);
  }
  int firsts = 0;
  for (int b = 0; b < 256; ++b) {
    if (by_first_byte_[b].empty()) continue;
    ++firsts;
    only_first_byte_ = b;
  }
  if (firsts != 1) only_first_byte_ = -1;
  for (auto& list : by_first_byte_) {
    std::stable_sort(list.begin(), list.end(), [&](uint32_t a, uint32_t b) {
      return tokens_[a].content.size() > tokens_[b].content.size();
    });
  }
}

void AddedTokenMatcher::split(std::string_view text, std::vector<TextSegment>& out) const {
  size_t start_offset = 0;  // end of the last emitted segment
  size_t pos = 0;           // where the search for the next match resumes
  while (pos < text.size()) {
    if (only_first_byte_ >= 0) {
      // Every token starts with the same byte ('<' for Qwen3's): jump to its next occurrence.
      const void* next = std::memchr(text.data() + pos, only_first_byte_, text.size() - pos);
      if (!next) break;
      pos = static_cast<const char*>(next) - text.data();
    }
    const auto& candidates = by_first_byte_[static_cast<unsigned char>(text[pos])];
    const AddedToken* hit = nullptr;
    for (uint32_t i : candidates) {
      const std::string& c = tokens_[i].content;
      if (text.compare(pos, c.size(), c) == 0) {
        hit = &tokens_[i];
        break;
      }
    }
    if (!hit) {
      ++pos;
      continue;
    }
    size_t start = pos, stop = pos + hit->content.size();
    pos = stop;  // like aho-corasick's find_iter, a discarded match is still consumed
    if (hit->single_word) {
      size_t unused;
      const bool start_space =
          start == 0 || !is_word_character(last_char(text.substr(0, start), &unused));
      const bool stop_space =
          stop == text.size() || !is_word_character(first_char(text.substr(stop)));
      if (!start_space || !stop_space) continue;
    }
    if (hit->lstrip) {
      size_t s = start;
      while (s > 0) {
        size_t prev;
        if (!is_whitespace(last_char(text.substr(0, s), &prev))) break;
        s = prev;
      }
      start = std::max(s, start_offset);  // earlier segments may already own those spaces
    }
    if (hit->rstrip) {
      while (stop < text.size()) {
        char32_t c;
        const int n = decode_utf8(text, stop, &c);
        if (n == 0 || !is_whitespace(c)) break;
        stop += n;
      }
      pos = stop;
    }
    if (start_offset < start) out.push_back({-1, start_offset, start});
    out.push_back({hit->id, start, stop});
    start_offset = stop;
  }
  if (start_offset < text.size()) out.push_back({-1, start_offset, text.size()});
}

}  // namespace titan::data
