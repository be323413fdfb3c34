// Every built-in module's config functions, registered once into config::config_registry().
// The CLI (train, configs) resolves command lines against this registry.
#pragma once

#include "titan/config/config_registry.h"
#include "titan/config/resolve.h"

namespace titan::models {

config::ConfigRegistry& builtin_config_registry();

// ResolveOptions for the CLI: the built-in config functions, the model registry's names as
// the accepted model.name values, and the installation the built-in default paths live in.
config::ResolveOptions builtin_resolve_options();

}  // namespace titan::models
