// torchtitan's model converters, applied between building the model and parallelizing it:
// today "lora" (model.converters, docs/lora.md). LoRA needs its frozen base in place first, so
// the base's initial load (a Hugging Face folder, checkpoint.initial_load_path) happens here,
// on the whole model, instead of after parallelize as for full training; a resume then brings
// only the adapters and their optimizer state.
#pragma once

#include <optional>

#include "titan/config/trainer_config.h"
#include "titan/lora/lora_model.h"
#include "titan/models/model_spec.h"
#include "titan/train/model_parts.h"

namespace titan::train {

// The LoRA setup when model.converters holds "lora", else nothing; it applies to the whole
// model (pipeline stages refuse LoRA, pipeline/pipeline_setup.h). `talk`: print the log lines.
// The frozen base is held in `compute_dtype`; a model built on the meta device gets it weight
// by weight, on `device` (lora/lora_model.h).
std::optional<lora::LoraSetup> apply_model_converters(const config::TrainerConfig& cfg,
                                                      const models::ModelSpec& spec,
                                                      ModelParts& parts,
                                                      at::ScalarType compute_dtype,
                                                      at::Device device, bool talk);

}  // namespace titan::train
