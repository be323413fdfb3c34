// Config functions of module `transformers_modeling_backend`, after the three-path recipe of
// AWS's post on training Qwen3 with torchtitan: the same job with Transformers' own model, and
// with the native Qwen3 (one line changed), plus debug-sized variants for 2 CPU cores.
#pragma once

#include "titan/config/config_registry.h"

namespace titan::models {

void register_transformers_configs(config::ConfigRegistry& registry);

}  // namespace titan::models
