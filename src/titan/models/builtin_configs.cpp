#include "titan/models/builtin_configs.h"

#include "titan/models/qwen3/config_functions.h"

namespace titan::models {

config::ConfigRegistry& builtin_config_registry() {
  // A function-local static runs the registrations exactly once, even across threads.
  static config::ConfigRegistry& registry = []() -> config::ConfigRegistry& {
    config::ConfigRegistry& r = config::config_registry();
    register_qwen3_configs(r);
    return r;
  }();
  return registry;
}

}  // namespace titan::models
