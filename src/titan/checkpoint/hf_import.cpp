#include "titan/checkpoint/hf_import.h"

#include <ATen/core/grad_mode.h>

#include <filesystem>
#include <fstream>

#include "titan/checkpoint/safetensors.h"
#include "titan/common/error.h"

namespace titan::checkpoint {

nlohmann::json read_hf_config(const std::string& dir) {
  const std::filesystem::path path = std::filesystem::path(dir) / "config.json";
  std::ifstream in(path);
  TITAN_CHECK(in, path.string(),
              " does not exist or cannot be read (a Hugging Face model "
              "directory needs config.json)");
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    fail(path.string(), ": invalid JSON: ", e.what());
  }
}

void load_hf_weights(models::Model& model, const models::ModelSpec& spec, const std::string& dir) {
  const SafetensorsDirectory files = SafetensorsDirectory::open(dir);
  const NamedTensors params = model.named_parameters();
  NamedTensors loaded;
  try {
    loaded = spec.adapter.from_hf(
        files.keys(), [&](const std::string& key) { return files.tensor(key); }, params);
  } catch (const Error& e) {
    fail(dir, ": ", e.what());
  }
  std::map<std::string, at::Tensor> by_name(loaded.begin(), loaded.end());
  for (const auto& [name, p] : params) {
    auto it = by_name.find(name);
    TITAN_CHECK(it != by_name.end(), dir, ": the checkpoint provides no tensor for ", name);
    TITAN_CHECK(it->second.sizes() == p.sizes(), dir, ": tensor for ", name, " has shape ",
                it->second.sizes(), ", the model expects ", p.sizes());
    TITAN_CHECK(it->second.is_floating_point(), dir, ": tensor for ", name, " has dtype ",
                it->second.scalar_type(), ", expected a floating-point type");
  }
  at::NoGradGuard no_grad;
  for (const auto& [name, p] : params) {
    at::Tensor target = p;
    target.copy_(by_name.at(name));
  }
}

}  // namespace titan::checkpoint
