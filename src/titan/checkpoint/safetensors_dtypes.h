// The safetensors dtype table (docs/qwen3.md section 5.1), private to the safetensors reader
// and writer: element bits, the rank the reference writer sorts by, and the torch type.
#pragma once

#include <c10/core/ScalarType.h>

#include <optional>
#include <string_view>

namespace titan::checkpoint::detail {

struct DtypeInfo {
  std::string_view name;  // "BF16"
  int bits;               // element size in bits (4 and 6 for the packed float formats)
  // Position in the Rust `Dtype` enum. The reference writer sorts tensors by this, descending
  // (which puts larger alignments first), then by name.
  int rank;
  std::optional<at::ScalarType> torch_type;  // empty when torch has no matching type
};

// nullptr when `name` is not a safetensors dtype.
const DtypeInfo* find_dtype(std::string_view name);
// nullptr when `type` has no safetensors dtype.
const DtypeInfo* find_dtype(at::ScalarType type);

}  // namespace titan::checkpoint::detail
