// The `llama3` module's named config functions (`--module llama3 --config llama3_8b`): the
// debug model and Llama 3.1 8B from scratch. They take every flag the qwen3 ones take, e.g.
// `--model.flavor auto --checkpoint.initial_load_path HF_FOLDER --checkpoint.initial_load_in_hf`
// to fine-tune a LlamaForCausalLM folder. The dimensions behind each flavor are in
// llama3_flavors.cpp.
#pragma once

#include "titan/config/config_registry.h"

namespace titan::models {

// Adds every llama3_* config function under module "llama3".
void register_llama3_configs(config::ConfigRegistry& registry);

}  // namespace titan::models
