// The `qwen3` module's named config functions (`--module qwen3 --config qwen3_0_6b`): debug
// models, from-scratch training at every published size, fine-tunes of the published
// checkpoints, and the default job of `make train`. They only name flavors; the dimensions
// behind each flavor are in qwen3_args.cpp.
#pragma once

#include "titan/config/config_registry.h"

namespace titan::models {

// Adds every qwen3_* config function under module "qwen3".
void register_qwen3_configs(config::ConfigRegistry& registry);

}  // namespace titan::models
