#include "titan/data/tokenizer/normalizer.h"

#include <utf8proc.h>

#include <cstdlib>
#include <memory>

#include "titan/common/error.h"

namespace titan::data {
namespace {

// True if s has no byte at or above `limit`. For NFC, limit 0xCC works: it is the lead byte of
// U+0300, the first combining mark, and no code point below U+0300 changes under NFC (all
// composition exclusions and singletons lie above it).
bool all_bytes_below(std::string_view s, unsigned char limit) {
  for (char c : s)
    if (static_cast<unsigned char>(c) >= limit) return false;
  return true;
}

// utf8proc_map of `in` with `options`, appended to `out`.
void append_mapped(std::string_view in, int options, std::string& out) {
  utf8proc_uint8_t* mapped = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(in.data()),
                                          static_cast<utf8proc_ssize_t>(in.size()), &mapped,
                                          static_cast<utf8proc_option_t>(options));
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(mapped, &std::free);
  if (n < 0) fail("normalization failed: ", utf8proc_errmsg(n));
  out.append(reinterpret_cast<const char*>(mapped), static_cast<size_t>(n));
}

bool is_ascii(char c) { return static_cast<unsigned char>(c) < 0x80; }

// NFC of `in`, which holds a byte >= 0xCC, into `out`. Text may be cut before any ASCII
// character and each part normalized alone: an ASCII character is a starter that nothing before
// it composes with (NFC_Quick_Check = Yes), so no composition or reordering crosses that cut.
// Only the parts with a byte >= 0xCC can change; each is a run of non-ASCII bytes together with
// the ASCII character before it (which may compose with what follows, as e + U+0301). Code or
// prose with a few such characters is then copied, not decomposed and recomposed whole.
void nfc_by_parts(std::string_view in, int options, std::string& out) {
  out.clear();
  out.reserve(in.size());
  size_t copied = 0;  // in[0, copied) is in `out`
  for (size_t i = copied; i < in.size(); ++i) {
    if (static_cast<unsigned char>(in[i]) < 0xCC) continue;
    size_t begin = i;
    while (begin > copied && !is_ascii(in[begin - 1])) --begin;
    if (begin > copied) --begin;  // the ASCII character before the run
    size_t end = i;
    while (end < in.size() && !is_ascii(in[end])) ++end;
    out.append(in.substr(copied, begin - copied));
    append_mapped(in.substr(begin, end - begin), options, out);
    copied = end;
    i = end;
  }
  out.append(in.substr(copied));
}

}  // namespace

Normalizer Normalizer::from_json(const nlohmann::json& j, const std::string& file) {
  Normalizer n;
  if (j.is_null()) return n;
  const std::string type = j.value("type", "");
  if (type == "Sequence") {
    for (const auto& step : j.at("normalizers")) {
      Normalizer inner = from_json(step, file);
      n.forms_.insert(n.forms_.end(), inner.forms_.begin(), inner.forms_.end());
    }
  } else if (type == "NFC") {
    n.forms_.push_back(Form::kNFC);
  } else if (type == "NFD") {
    n.forms_.push_back(Form::kNFD);
  } else if (type == "NFKC") {
    n.forms_.push_back(Form::kNFKC);
  } else if (type == "NFKD") {
    n.forms_.push_back(Form::kNFKD);
  } else {
    fail("tokenizer file ", file, ": unsupported normalizer type '", type,
         "' (supported: NFC, NFD, NFKC, NFKD, Sequence)");
  }
  return n;
}

std::string_view Normalizer::apply(std::string_view in, std::string& storage) const {
  std::string_view current = in;
  for (Form form : forms_) {
    const bool nfc = form == Form::kNFC;
    if (all_bytes_below(current, nfc ? 0xCC : 0x80)) continue;
    int options = UTF8PROC_STABLE;
    switch (form) {
      case Form::kNFC:
        options |= UTF8PROC_COMPOSE;
        break;
      case Form::kNFD:
        options |= UTF8PROC_DECOMPOSE;
        break;
      case Form::kNFKC:
        options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
        break;
      case Form::kNFKD:
        options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
        break;
    }
    // `current` may be a view of `storage`: build the result apart, then move it in.
    std::string result;
    if (nfc) {
      nfc_by_parts(current, options, result);
    } else {
      append_mapped(current, options, result);
    }
    storage = std::move(result);
    current = storage;
  }
  return current;
}

}  // namespace titan::data
