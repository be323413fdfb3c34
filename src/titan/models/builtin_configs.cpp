#include "titan/models/builtin_configs.h"

#include "titan/common/installation.h"
#include "titan/models/llama3/config_functions.h"
#include "titan/models/model_spec.h"
#include "titan/models/qwen3/config_functions.h"
#include "titan/models/transformers_configs.h"

namespace titan::models {

config::ConfigRegistry& builtin_config_registry() {
  // A function-local static runs the registrations exactly once, even across threads.
  static config::ConfigRegistry& registry = []() -> config::ConfigRegistry& {
    config::ConfigRegistry& r = config::config_registry();
    register_qwen3_configs(r);
    register_llama3_configs(r);
    register_transformers_configs(r);
    return r;
  }();
  return registry;
}

config::ResolveOptions builtin_resolve_options() {
  config::ResolveOptions options;
  options.registry = &builtin_config_registry();
  options.model_names = model_spec_names();
  options.install_root = installation_root();
  return options;
}

}  // namespace titan::models
