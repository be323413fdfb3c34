#include "titan/models/model_spec.h"

#include "titan/common/error.h"
#include "titan/models/qwen3/qwen3_spec.h"

namespace titan::models {
namespace {

// The registry, created on first use. The built-in specs are registered here, lazily, rather
// than by static initialisers in their own files: a static library drops object files nothing
// references, and their initialisers with them.
std::map<std::string, ModelSpec>& registry() {
  static std::map<std::string, ModelSpec> specs = [] {
    std::map<std::string, ModelSpec> m;
    ModelSpec qwen3 = qwen3_model_spec();
    m.emplace(qwen3.name, std::move(qwen3));
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
  if (it == specs.end()) {
    std::string known;
    for (const auto& [n, _] : specs) known += (known.empty() ? "" : ", ") + n;
    fail("unknown model '", name, "' (model.name must be one of: ", known, ")");
  }
  return it->second;
}

std::vector<std::string> model_spec_names() {
  std::vector<std::string> names;
  for (const auto& [n, _] : registry()) names.push_back(n);
  return names;
}

}  // namespace titan::models
