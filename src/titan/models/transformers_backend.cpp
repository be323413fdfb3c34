#include "titan/models/transformers_backend.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>

#include "titan/common/error.h"

namespace fs = std::filesystem;

namespace titan::models {
namespace {

// <dir of the titan executable>/../lib/libtitan_transformers.so, or $TITAN_TRANSFORMERS_BACKEND.
std::string library_path() {
  const char* env = std::getenv("TITAN_TRANSFORMERS_BACKEND");
  if (env != nullptr && *env != '\0') return env;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return (exe.parent_path().parent_path() / "lib" / "libtitan_transformers.so").string();
}

const ModelSpec& backend() {
  static const ModelSpec* spec = nullptr;
  static std::string error;
  static std::once_flag loaded;
  std::call_once(loaded, [] {
    const std::string path = library_path();
    if (!fs::exists(path)) {
      error = "the Transformers backend library " + path + " does not exist: this build has " +
              "none (it needs the Python development files of the build's Python)";
      return;
    }
    // Global: the Python extension modules it imports need libpython's symbols.
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (handle == nullptr) {
      const char* why = dlerror();
      error = "cannot load the Transformers backend " + path + ": " + (why ? why : "dlopen failed");
      return;
    }
    auto entry =
        reinterpret_cast<const ModelSpec* (*)()>(dlsym(handle, "titan_transformers_model_spec"));
    if (entry == nullptr) {
      error = path + " is not titan's Transformers backend (no titan_transformers_model_spec)";
      return;
    }
    spec = entry();  // the library stays loaded for the life of the process
  });
  TITAN_CHECK(spec != nullptr, error);
  return *spec;
}

}  // namespace

ModelSpec transformers_backend_spec() {
  ModelSpec spec;
  spec.name = "transformers";
  spec.description = "Hugging Face Transformers' own model, trained by titan";
  spec.loads_pretrained_in_build = true;
  spec.overridable_ops = false;
  spec.build = [](const config::TrainerConfig& cfg, const BuildOptions& opts) {
    return backend().build(cfg, opts);
  };
  spec.build_from_hf_config = [](const nlohmann::json& config, const std::string& source,
                                 const BuildOptions& opts) {
    return backend().build_from_hf_config(config, source, opts);
  };
  spec.parallelize = [](Model& model, const config::TrainerConfig& cfg, DataParallelWrapper* dp) {
    backend().parallelize(model, cfg, dp);
  };
  spec.post_optimizer_build = [](Model& model, const OptimizerHooks& hooks) {
    backend().post_optimizer_build(model, hooks);
  };
  spec.adapter.to_hf = [](const NamedTensors& native) { return backend().adapter.to_hf(native); };
  spec.adapter.from_hf = [](const std::vector<std::string>& keys,
                            const std::function<at::Tensor(const std::string&)>& read,
                            const NamedTensors& expected) {
    return backend().adapter.from_hf(keys, read, expected);
  };
  spec.flops_per_token = [](Model& model, int64_t seq_len) {
    return backend().flops_per_token(model, seq_len);
  };
  return spec;
}

}  // namespace titan::models
