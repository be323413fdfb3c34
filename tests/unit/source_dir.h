// The clone the tests run from, as CTest tells them at run time (TITAN_SOURCE_DIR in each
// test's environment, set by CMakeLists.txt). Not a compile-time constant: ccache shares object
// files between clones, and a path compiled into a cached object would name another clone.
#pragma once

#include <cstdlib>
#include <stdexcept>
#include <string>

namespace titan::testing {

inline std::string source_dir() {
  const char* dir = std::getenv("TITAN_SOURCE_DIR");
  if (dir == nullptr || *dir == '\0')
    throw std::runtime_error(
        "TITAN_SOURCE_DIR is not set: run the tests through ctest, or set it to the clone's root");
  return dir;
}

}  // namespace titan::testing
