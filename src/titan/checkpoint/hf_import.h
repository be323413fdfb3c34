// Hugging Face import: config.json and safetensors weights of a model directory into a
// built model, through the model spec's state-dict adapter (docs/qwen3.md section 5.2, 5.3).
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "titan/checkpoint/tensor_layout.h"
#include "titan/models/model_spec.h"

namespace titan::checkpoint {

// <dir>/config.json parsed; a missing file or invalid JSON throws titan::Error naming it.
nlohmann::json read_hf_config(const std::string& dir);

// Loads model.safetensors (or the sharded index) of `dir` into `model`'s parameters, casting
// to their dtype/device; with a sharded `layout`, each parameter gets the rows this rank holds.
// Every tensor is read, converted and shape-checked before the first parameter is written: on
// any error (missing, unexpected or mis-shaped tensors, named) the model is left unchanged.
void load_hf_weights(models::Model& model, const models::ModelSpec& spec, const std::string& dir,
                     const TensorLayout& layout = whole_tensors());

}  // namespace titan::checkpoint
