// Named config functions, grouped by module (`--module qwen3 --config qwen3_debugmodel`).
// A config function returns a complete TrainerConfig; the TOML overlay and the command-line
// overrides are applied on top of it (resolve.h). Modules register their functions once
// (models/builtin_configs.cpp does it for every built-in module).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "titan/config/trainer_config.h"

namespace titan::config {

struct ConfigFunction {
  std::string name;
  std::string description;
  std::function<TrainerConfig()> make;
};

class ConfigRegistry {
 public:
  // Throws when module/name is already registered.
  void add(const std::string& module, const std::string& name, std::function<TrainerConfig()> fn,
           const std::string& description);

  bool has(const std::string& module, const std::string& name) const;
  std::vector<std::string> modules() const;  // sorted
  // The module's functions in registration order; throws listing the modules when unknown.
  const std::vector<ConfigFunction>& functions(const std::string& module) const;
  // Throws listing the accepted modules / the module's configs when unknown.
  const ConfigFunction& get(const std::string& module, const std::string& name) const;
  TrainerConfig make(const std::string& module, const std::string& name) const {
    return get(module, name).make();
  }

 private:
  std::map<std::string, std::vector<ConfigFunction>> modules_;
};

// The process-wide registry (a registry is one of the allowed globals). Prefer
// models::builtin_config_registry(), which fills it with every built-in module first.
ConfigRegistry& config_registry();

}  // namespace titan::config
