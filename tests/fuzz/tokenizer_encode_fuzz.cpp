// The Qwen3 tokenizer (assets/qwen3-tokenizer, or TITAN_FUZZ_TOKENIZER) on arbitrary bytes:
// valid UTF-8 encodes to ids in the vocabulary whose decoded text (the input after the
// tokenizer's NFC normalization) encodes to the same ids; anything else is a titan::Error,
// and only for input that is really not UTF-8.
#include <utf8proc.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "fuzz_input.h"
#include "titan/common/error.h"
#include "titan/data/tokenizer/tokenizer.h"

namespace {

bool is_utf8(std::string_view text) {
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(text.data());
  utf8proc_ssize_t left = static_cast<utf8proc_ssize_t>(text.size());
  while (left > 0) {
    utf8proc_int32_t cp = 0;
    const utf8proc_ssize_t n = utf8proc_iterate(p, left, &cp);
    if (n <= 0) return false;
    p += n;
    left -= n;
  }
  return true;
}

const titan::data::Tokenizer& qwen3() {
  static const titan::data::Tokenizer tokenizer = [] {
    // Set by CTest and scripts/fuzz: a run-time path, since ccache shares objects between clones.
    const char* dir = std::getenv("TITAN_FUZZ_TOKENIZER");
    if (dir == nullptr) {
      std::fprintf(stderr, "set TITAN_FUZZ_TOKENIZER to a folder holding Qwen3's tokenizer.json\n");
      std::abort();
    }
    return titan::data::Tokenizer::from_directory(dir);
  }();
  return tokenizer;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const auto ids = qwen3().encode(text);
    for (int32_t id : ids) titan::fuzz::require(id >= 0 && id < qwen3().vocab_size());
    titan::fuzz::require(qwen3().encode(qwen3().decode(ids)) == ids);
  } catch (const titan::Error&) {
    titan::fuzz::require(!is_utf8(text));
  }
  return 0;
}
