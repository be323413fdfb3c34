// Every built-in model family's spec, in one place (like builtin_configs.h for config
// functions): the model registry (model_spec.h) is filled from this list on first use.
#pragma once

#include <vector>

#include "titan/models/model_spec.h"

namespace titan::models {

std::vector<ModelSpec> builtin_model_specs();

}  // namespace titan::models
