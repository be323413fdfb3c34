// The Hugging Face export at the end of training (checkpoint.last_save_in_hf): a directory
// that AutoModelForCausalLM.from_pretrained loads, in <dump_folder>/hf/step-N.
#pragma once

#include <cstdint>
#include <string>

#include "titan/checkpoint/tensor_layout.h"
#include "titan/config/trainer_config.h"
#include "titan/models/model_spec.h"

namespace titan::train {

// Writes the export when the config asks for one and returns its folder ("" otherwise). With a
// sharded `layout` every rank calls it (the parameters are gathered one at a time) and the
// coordinator writes.
std::string export_hf_if_requested(const config::TrainerConfig& cfg, const models::ModelSpec& spec,
                                   models::Model& model, int64_t step,
                                   const checkpoint::TensorLayout& layout);

}  // namespace titan::train
