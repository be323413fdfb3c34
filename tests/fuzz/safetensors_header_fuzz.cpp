// The safetensors header parser (length field, JSON, dtypes, shapes, offsets) on arbitrary
// bytes: it either throws titan::Error or returns a header whose tensors lie inside the data.
#include <cstdint>

#include "fuzz_input.h"
#include "titan/checkpoint/safetensors_header.h"
#include "titan/common/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using titan::fuzz::require;
  try {
    const auto header = titan::checkpoint::parse_safetensors_header("fuzz.safetensors", data, size);
    require(header.data_start >= 8 && header.data_start <= size);
    uint64_t expected_begin = 0;
    for (const auto& t : header.tensors) {
      require(t.begin == expected_begin && t.begin <= t.end);
      require(t.end <= size - header.data_start);
      expected_begin = t.end;
    }
    require(expected_begin == size - header.data_start);
  } catch (const titan::Error&) {
  }
  return 0;
}
