#include "titan/common/python_library.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <string>

#include "titan/common/error.h"

namespace fs = std::filesystem;

namespace titan {
namespace {

std::string library_path() {
  const char* env = std::getenv("TITAN_TRANSFORMERS_BACKEND");
  if (env != nullptr && *env != '\0') return env;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return (exe.parent_path().parent_path() / "lib" / "libtitan_transformers.so").string();
}

struct Library {
  std::string path;
  void* handle = nullptr;
  std::string error;  // why handle is null
};

const Library& library() {
  static Library lib;
  static std::once_flag loaded;
  std::call_once(loaded, [] {
    lib.path = library_path();
    if (!fs::exists(lib.path)) {
      lib.error = "the library " + lib.path + " does not exist: this build has none (it needs " +
                  "the Python development files of the build's Python)";
      return;
    }
    // Global: the Python extension modules it imports need libpython's symbols.
    lib.handle = dlopen(lib.path.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (lib.handle == nullptr) {
      const char* why = dlerror();
      lib.error = "cannot load " + lib.path + ": " + (why ? why : "dlopen failed");
    }
  });
  return lib;
}

}  // namespace

void* python_library_symbol(const char* symbol, const char* what) {
  const Library& lib = library();
  TITAN_CHECK(lib.handle != nullptr, what, ": ", lib.error);
  void* address = dlsym(lib.handle, symbol);
  TITAN_CHECK(address != nullptr, what, ": ", lib.path, " is not titan's Python library (no ",
              symbol, ")");
  return address;
}

}  // namespace titan
