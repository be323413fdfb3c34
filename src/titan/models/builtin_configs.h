// Every built-in module's config functions, registered once into config::config_registry().
// The CLI (train, configs) resolves command lines against this registry.
#pragma once

#include "titan/config/config_registry.h"

namespace titan::models {

config::ConfigRegistry& builtin_config_registry();

}  // namespace titan::models
