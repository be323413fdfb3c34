// The Hugging Face export at the end of training (checkpoint.last_save_in_hf): a directory
// that AutoModelForCausalLM.from_pretrained loads, in <dump_folder>/hf/step-N. With LoRA
// (lora.export_format) the merged weights go there, and the PEFT adapter folder to
// <dump_folder>/hf/step-N-adapter.
#pragma once

#include <cstdint>
#include <string>

#include "titan/checkpoint/hf_export.h"
#include "titan/checkpoint/tensor_layout.h"
#include "titan/config/trainer_config.h"
#include "titan/lora/lora_model.h"
#include "titan/models/model_spec.h"

namespace titan::train {

struct ExportedFolders {
  std::string hf;       // the (merged) Hugging Face folder, "" when not written
  std::string adapter;  // the PEFT adapter folder (LoRA), "" when not written
};

// Writes the export when the config asks for one. With a sharded `layout` every rank calls it
// (the parameters are gathered one at a time) and the coordinator writes. `lora`: the run's
// LoRA setup, or nullptr. `tensors`, when given, are what is written (a pipeline's, gathered
// from its stages: pipeline/stage_export.h) instead of the model's parameters.
ExportedFolders export_hf_if_requested(const config::TrainerConfig& cfg,
                                       const models::ModelSpec& spec, models::ModelTensors& model,
                                       int64_t step, const checkpoint::TensorLayout& layout,
                                       const lora::LoraSetup* lora = nullptr,
                                       const checkpoint::NativeTensors* tensors = nullptr);

// The LoRA exports of `setup` into `merged_dir` and `adapter_dir` (either may be "": skipped).
void export_lora(const models::ModelSpec& spec, models::ModelTensors& model,
                 const lora::LoraSetup& setup, const std::string& merged_dir,
                 const std::string& adapter_dir, const std::string& export_dtype,
                 uint64_t max_shard_bytes, const std::string& tokenizer_dir,
                 const std::string& base_model_name, const checkpoint::TensorLayout& layout);

}  // namespace titan::train
