#include "titan/models/model_spec.h"

#include <algorithm>
#include <map>

#include "titan/common/error.h"
#include "titan/common/strings.h"
#include "titan/models/builtin_models.h"

namespace titan::models {
namespace {

// Created on first use with the built-in families. They are registered from here, not by
// static initialisers in their own files: a static library drops object files nothing
// references, and their initialisers with them.
std::map<std::string, ModelSpec>& registry() {
  static std::map<std::string, ModelSpec> specs = [] {
    std::map<std::string, ModelSpec> m;
    for (ModelSpec& spec : builtin_model_specs()) m.emplace(spec.name, std::move(spec));
    return m;
  }();
  return specs;
}

}  // namespace

void register_model_spec(ModelSpec spec) {
  TITAN_CHECK(!spec.name.empty(), "a model spec needs a name");
  registry()[spec.name] = std::move(spec);
}

const ModelSpec& get_model_spec(const std::string& name) {
  const auto& specs = registry();
  auto it = specs.find(name);
  if (it == specs.end())
    fail("model.name = \"", name, "\": accepted values are ", join(model_spec_names()));
  return it->second;
}

std::vector<std::string> model_spec_names() {
  std::vector<std::string> names;
  for (const auto& [n, _] : registry()) names.push_back(n);
  return names;
}

const ModelSpec& spec_for_hf_config(const nlohmann::json& hf_config, const std::string& source) {
  TITAN_CHECK(hf_config.is_object(), source, ": config.json must be a JSON object");
  std::string model_type;
  if (hf_config.contains("model_type") && hf_config["model_type"].is_string())
    model_type = hf_config["model_type"].get<std::string>();
  std::vector<std::string> supported;
  for (const auto& [name, spec] : registry()) {
    for (const std::string& type : spec.hf_model_types) {
      if (type == model_type) return spec;
      supported.push_back(type + " (" + name + ")");
    }
  }
  if (model_type.empty() && hf_config.contains("architectures") &&
      hf_config["architectures"].is_array()) {
    for (const auto& arch : hf_config["architectures"]) {
      if (!arch.is_string()) continue;
      for (const auto& [name, spec] : registry()) {
        const auto& known = spec.hf_architectures;
        if (std::find(known.begin(), known.end(), arch.get<std::string>()) != known.end())
          return spec;
      }
    }
  }
  std::string architectures;
  if (hf_config.contains("architectures") && hf_config["architectures"].is_array() &&
      !hf_config["architectures"].empty())
    architectures = " " + hf_config["architectures"].dump();
  if (model_type.empty()) {
    fail(source, ": no model_type", architectures, "; supported model types: ", join(supported));
  }
  fail(source, ": model_type '", model_type, "'", architectures,
       " is not supported; supported model types: ", join(supported));
}

}  // namespace titan::models
