// Loading tokenizer.json from arbitrary bytes: it either throws titan::Error or gives a
// tokenizer that encodes and decodes a few texts without crashing.
#include <cstdint>
#include <string>

#include "fuzz_input.h"
#include "titan/common/error.h"
#include "titan/data/tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  titan::fuzz::InputFile file(data, size, ".json");
  // No start-up cache: this target is about the JSON reader, and would write a file per input.
  try {
    const auto tokenizer = titan::data::Tokenizer::from_directory(file.path(), /*use_cache=*/false);
    for (const char* text : {"hello world", "  \n\t x=1", "中文 😀", "<|endoftext|>a"}) {
      try {
        tokenizer.decode(tokenizer.encode(text));
      } catch (const titan::Error&) {
      }
    }
  } catch (const titan::Error&) {
  }
  return 0;
}
