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
    utf8proc_uint8_t* out = nullptr;
    const utf8proc_ssize_t n =
        utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(current.data()),
                     static_cast<utf8proc_ssize_t>(current.size()), &out,
                     static_cast<utf8proc_option_t>(options));
    std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(out, &std::free);
    if (n < 0) fail("normalization failed: ", utf8proc_errmsg(n));
    storage.assign(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
    current = storage;
  }
  return current;
}

}  // namespace titan::data
