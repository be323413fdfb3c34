// The message of the titan::Error `f` throws, or "" when it throws none: for tests that check
// what an error names.
#pragma once

#include <functional>
#include <string>

#include "titan/common/error.h"

namespace titan::testing {

inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const titan::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace titan::testing
