// The header of a safetensors file (docs/qwen3.md section 5.1), parsed and validated without
// torch: the reader (safetensors.h) maps the file and calls this, and the fuzz target and the
// sanitizer build (tests/fuzz, tests/sanitized) call it on raw bytes.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace titan::checkpoint {

struct TensorInfo {
  std::string name;
  std::string dtype;  // safetensors dtype string, e.g. "BF16"
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // byte offsets relative to the data section
  uint64_t end = 0;
};

struct SafetensorsHeader {
  uint64_t data_start = 0;          // 8 + the JSON header's length
  std::vector<TensorInfo> tensors;  // in file (offset) order
  std::map<std::string, std::string> metadata;
};

// Validates the whole of `bytes` (a complete file of `size` bytes) as the reference parser
// does: the length field, the JSON (no duplicate keys), dtypes, shapes, offsets tiling the
// data exactly and the file ending where the data does. Throws titan::Error naming `path`
// and the problem.
SafetensorsHeader parse_safetensors_header(const std::string& path, const uint8_t* bytes,
                                           uint64_t size);

}  // namespace titan::checkpoint
