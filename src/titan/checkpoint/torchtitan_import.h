// Loading the model of a torchtitan checkpoint (torchtitan_checkpoint.h) into a built model,
// as torchtitan's initial_load_model_only does: parameters and buffers, cast to their dtype;
// with a sharded layout each parameter gets the rows this rank holds. The checkpoint is checked
// against the whole model before the first tensor is written.
#pragma once

#include <string>
#include <vector>

#include "titan/checkpoint/tensor_layout.h"
#include "titan/models/model.h"

namespace titan::checkpoint {

// `model_description` names the model in errors ("qwen3, flavor debugmodel"). Returns the
// notes of what the checkpoint holds that the model does not take (one line each).
std::vector<std::string> load_torchtitan_weights(models::Model& model, const std::string& dir,
                                                 const std::string& model_description,
                                                 const TensorLayout& layout = whole_tensors());

}  // namespace titan::checkpoint
