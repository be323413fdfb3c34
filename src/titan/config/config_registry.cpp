#include "titan/config/config_registry.h"

#include "titan/common/did_you_mean.h"
#include "titan/common/error.h"
#include "titan/common/strings.h"

namespace titan::config {
void ConfigRegistry::add(const std::string& module, const std::string& name,
                         std::function<TrainerConfig()> fn, const std::string& description) {
  TITAN_CHECK(!module.empty() && !name.empty(), "config registry: empty module or config name");
  TITAN_CHECK(fn != nullptr, "config registry: ", module, "/", name, " has no function");
  TITAN_CHECK(!has(module, name), "config registry: ", module, "/", name, " is registered twice");
  modules_[module].push_back({name, description, std::move(fn)});
}

bool ConfigRegistry::has(const std::string& module, const std::string& name) const {
  const auto it = modules_.find(module);
  if (it == modules_.end()) return false;
  for (const auto& fn : it->second) {
    if (fn.name == name) return true;
  }
  return false;
}

std::vector<std::string> ConfigRegistry::modules() const {
  std::vector<std::string> names;
  for (const auto& [name, functions] : modules_) names.push_back(name);
  return names;
}

const std::vector<ConfigFunction>& ConfigRegistry::functions(const std::string& module) const {
  const auto it = modules_.find(module);
  if (it == modules_.end()) {
    if (modules_.empty()) fail("unknown module \"", module, "\": no modules are registered");
    fail("unknown module \"", module, "\"", did_you_mean(module, modules()),
         "; accepted modules: ", join(modules()));
  }
  return it->second;
}

const ConfigFunction& ConfigRegistry::get(const std::string& module,
                                          const std::string& name) const {
  const auto& candidates = functions(module);
  std::vector<std::string> names;
  for (const auto& fn : candidates) {
    if (fn.name == name) return fn;
    names.push_back(fn.name);
  }
  fail("unknown config \"", name, "\" in module ", module, did_you_mean(name, names),
       "; accepted configs: ", join(names));
}

ConfigRegistry& config_registry() {
  static ConfigRegistry registry;
  return registry;
}

}  // namespace titan::config
