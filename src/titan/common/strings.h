// Small string helpers shared by error messages.
#pragma once

#include <c10/util/ArrayRef.h>

#include <cstdint>
#include <string>
#include <vector>

namespace titan {

// "a, b, c": used to list accepted values in error messages.
inline std::string join(const std::vector<std::string>& items,
                        const std::string& separator = ", ") {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : separator) + item;
  return out;
}

// "[2, 3, 4]": a tensor shape as error messages print it.
inline std::string shape_to_string(c10::IntArrayRef shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

}  // namespace titan
