// The dataset record readers on arbitrary file contents: .jsonl, .jsonl.gz and .jsonl.zst
// (the first byte picks which) and plain text. Every document either reads or throws
// titan::Error (a DataReadError naming file:line).
#include <cstdint>
#include <string>

#include "fuzz_input.h"
#include "titan/common/error.h"
#include "titan/data/document_source.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const char* const kSuffixes[] = {".jsonl", ".jsonl.gz", ".jsonl.zst", ".txt"};
  const std::string suffix = kSuffixes[data[0] % 4];
  titan::fuzz::InputFile file(data + 1, size - 1, suffix);
  try {
    auto source = titan::data::DocumentSource::open(file.path(), data[0] & 4 ? "content" : "text");
    for (int64_t i = 0; i < source->size(); ++i) {
      try {
        source->text(i);
      } catch (const titan::Error&) {
      }
    }
  } catch (const titan::Error&) {
  }
  return 0;
}
