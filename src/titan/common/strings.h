// Small string helpers shared by error messages.
#pragma once

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

}  // namespace titan
