#include "titan/models/transformers_backend.h"

#include <mutex>

#include "titan/common/error.h"
#include "titan/common/python_library.h"

namespace titan::models {
namespace {

const ModelSpec& backend() {
  static const ModelSpec* spec = nullptr;
  static std::once_flag resolved;
  std::call_once(resolved, [] {
    auto entry = reinterpret_cast<const ModelSpec* (*)()>(
        python_library_symbol("titan_transformers_model_spec", "the Transformers backend"));
    spec = entry();  // the library stays loaded for the life of the process
  });
  TITAN_CHECK(spec != nullptr, "the Transformers backend could not be loaded");
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
  spec.parallelize = [](Model& model, const config::TrainerConfig& cfg, ParallelContext& parallel) {
    backend().parallelize(model, cfg, parallel);
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
  spec.pipeline = [](Model& model, const StageParts& parts) { backend().pipeline(model, parts); };
  return spec;
}

}  // namespace titan::models
