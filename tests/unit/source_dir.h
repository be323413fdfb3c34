// The clone the tests run from, found at run time: $TITAN_SOURCE_DIR when set, else the
// titan_source_dir.txt that CMake writes beside the test executables. Not a compile-time
// constant: ccache shares object files between clones, and a path compiled into a cached
// object would name another clone.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

namespace titan::testing {

inline std::string source_dir() {
  if (const char* dir = std::getenv("TITAN_SOURCE_DIR"); dir != nullptr && *dir != '\0') return dir;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe");
  const std::filesystem::path file = exe.parent_path() / "titan_source_dir.txt";
  std::ifstream in(file);
  std::string dir;
  if (!std::getline(in, dir) || dir.empty())
    throw std::runtime_error("no " + file.string() +
                             " (CMake writes it): set TITAN_SOURCE_DIR to the clone's root");
  return dir;
}

}  // namespace titan::testing
