#include "titan/common/installation.h"

#include <filesystem>

namespace fs = std::filesystem;

namespace titan {

std::string executable_path() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.string();
}

std::string installation_root() {
  const std::string exe = executable_path();
  if (exe.empty()) return "";
  fs::path folder = fs::path(exe).parent_path();
  for (int level = 0; level < 4 && !folder.empty(); ++level) {
    std::error_code ec;
    if (fs::is_directory(folder / "assets", ec)) return folder.string();
    if (folder == folder.parent_path()) break;
    folder = folder.parent_path();
  }
  return "";
}

}  // namespace titan
