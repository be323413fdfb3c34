#define PCRE2_CODE_UNIT_WIDTH 8
#include "titan/data/tokenizer/pre_tokenizer.h"

#include <pcre2.h>

#include "titan/common/error.h"
#include "titan/data/tokenizer/qwen_split_scanner.h"

namespace titan::data {
namespace {

// GPT-2's pattern, used by a ByteLevel pre-tokenizer with use_regex = true.
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof(buffer));
  return reinterpret_cast<const char*>(buffer);
}

// A literal string as a PCRE2 pattern: escape every non-alphanumeric ASCII character.
std::string escape_literal(const std::string& s) {
  std::string out;
  for (char c : s) {
    const bool alnum = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (!alnum && static_cast<unsigned char>(c) < 0x80) out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

// Oniguruma (which `tokenizers` uses) matches \s against Unicode's White_Space property, while
// PCRE2's UCP \s also takes U+180E MONGOLIAN VOWEL SEPARATOR (white space before Unicode 6.3).
// Spelling \s and \S out as White_Space classes makes PCRE2 agree with Oniguruma.
std::string with_white_space_classes(const std::string& pattern) {
  constexpr const char* kSpace = "\\t-\\r\\x{85}\\p{Z}";
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char e = pattern[++i];
      if (e == 's') {
        out += in_class ? std::string(kSpace) : "[" + std::string(kSpace) + "]";
      } else if (e == 'S' && !in_class) {
        out += "[^" + std::string(kSpace) + "]";
      } else {
        out += c;
        out += e;
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal member, not the end of the class.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
      continue;
    }
    if (in_class && c == '[' && i + 1 < pattern.size() && pattern[i + 1] == ':') {
      const size_t end = pattern.find(":]", i + 2);  // a POSIX class such as [:alpha:]
      if (end != std::string::npos) {
        out.append(pattern, i, end + 2 - i);
        i = end + 1;
        continue;
      }
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

}  // namespace

// A compiled pattern (RAII over pcre2_code).
class SplitRegex {
 public:
  // `scanner`: match Qwen's pattern with qwen_split_match_ascii() where it can decide.
  SplitRegex(const std::string& pattern, const std::string& file, bool scanner)
      : pattern_(with_white_space_classes(pattern)),
        qwen_(scanner && pattern == kQwenSplitPattern) {
    int error = 0;
    PCRE2_SIZE offset = 0;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern_.data()), pattern_.size(),
                          PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
    if (!code_) {
      fail("tokenizer file ", file, ": cannot compile pre-tokenizer regex '", pattern,
           "' at offset ", offset, ": ", pcre2_message(error));
    }
    pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);  // falls back to the interpreter on failure
  }
  ~SplitRegex() { pcre2_code_free(code_); }
  SplitRegex(const SplitRegex&) = delete;
  SplitRegex& operator=(const SplitRegex&) = delete;

  // Isolated split: every match and every gap between matches becomes its own piece.
  void split(std::string_view text, PreTokenizerScratch::Pcre& p,
             std::vector<std::string_view>& out) const;

 private:
  pcre2_code* code_ = nullptr;
  std::string pattern_;
  bool qwen_ = false;
};

struct PreTokenizerScratch::Pcre {
  pcre2_match_data* match = pcre2_match_data_create(1, nullptr);
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* jit_stack = nullptr;
  ~Pcre() {
    pcre2_match_data_free(match);
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(jit_stack);
  }
  // The default 32 KiB JIT stack can run out on pathological inputs (very long runs that the
  // lookahead alternatives backtrack over); then retry with a large one.
  void grow_jit_stack() {
    if (jit_stack) fail("pre-tokenizer regex ran out of JIT stack even at 256 MiB");
    jit_stack = pcre2_jit_stack_create(1 << 20, 256 << 20, nullptr);
    context = pcre2_match_context_create(nullptr);
    pcre2_jit_stack_assign(context, nullptr, jit_stack);
  }
};

PreTokenizerScratch::PreTokenizerScratch() : pcre(std::make_unique<Pcre>()) {}
PreTokenizerScratch::~PreTokenizerScratch() = default;

void SplitRegex::split(std::string_view text, PreTokenizerScratch::Pcre& p,
                       std::vector<std::string_view>& out) const {
  const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t start = 0, last_end = 0;
  while (start < text.size()) {
    if (qwen_) {
      // Qwen's pattern matches at every position, so there are no gaps to emit.
      if (const size_t end = qwen_split_match_ascii(text, start)) {
        out.push_back(text.substr(start, end - start));
        start = last_end = end;
        continue;
      }
    }
    int rc =
        pcre2_match(code_, subject, text.size(), start, PCRE2_NO_UTF_CHECK, p.match, p.context);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      p.grow_jit_stack();
      continue;
    }
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) fail("pre-tokenizer regex failed: ", pcre2_message(rc));
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(p.match);
    const size_t begin = ov[0], end = ov[1];
    if (begin > last_end) out.push_back(text.substr(last_end, begin - last_end));
    if (end > begin) {
      out.push_back(text.substr(begin, end - begin));
      last_end = end;
      start = end;
    } else {
      // An empty match produces no piece; step over one code point.
      start = begin + 1;
      while (start < text.size() && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80)
        ++start;
    }
  }
  if (last_end < text.size()) out.push_back(text.substr(last_end));
}

PreTokenizer::PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;
PreTokenizer::~PreTokenizer() = default;

PreTokenizer PreTokenizer::from_json(const nlohmann::json& j, const std::string& file,
                                     bool scanner) {
  PreTokenizer pt;
  if (j.is_null()) return pt;
  const std::string type = j.value("type", "");
  if (type == "Sequence") {
    for (const auto& step : j.at("pretokenizers")) {
      PreTokenizer inner = from_json(step, file, scanner);
      for (auto& r : inner.regexes_) pt.regexes_.push_back(std::move(r));
    }
  } else if (type == "Split") {
    const auto& pattern = j.at("pattern");
    const std::string behavior = j.value("behavior", "");
    if (behavior != "Isolated" || j.value("invert", false)) {
      fail("tokenizer file ", file, ": unsupported Split pre-tokenizer (behavior '", behavior,
           "', invert ", j.value("invert", false), "); only Isolated without invert is supported");
    }
    if (pattern.contains("Regex")) {
      pt.regexes_.push_back(
          std::make_unique<SplitRegex>(pattern.at("Regex").get<std::string>(), file, scanner));
    } else {
      pt.regexes_.push_back(std::make_unique<SplitRegex>(
          escape_literal(pattern.at("String").get<std::string>()), file, false));
    }
  } else if (type == "ByteLevel") {
    if (j.value("add_prefix_space", false)) {
      fail("tokenizer file ", file,
           ": ByteLevel pre-tokenizer with add_prefix_space is not supported");
    }
    if (j.value("use_regex", true))
      pt.regexes_.push_back(std::make_unique<SplitRegex>(kGpt2Pattern, file, false));
  } else {
    fail("tokenizer file ", file, ": unsupported pre-tokenizer type '", type,
         "' (supported: Split, ByteLevel, Sequence)");
  }
  return pt;
}

void PreTokenizer::split(std::string_view text, PreTokenizerScratch& s) const {
  s.pieces.clear();
  if (text.empty()) return;
  s.pieces.push_back(text);
  for (const auto& regex : regexes_) {
    s.next.clear();
    for (std::string_view piece : s.pieces) regex->split(piece, *s.pcre, s.next);
    s.pieces.swap(s.next);
  }
}

}  // namespace titan::data
