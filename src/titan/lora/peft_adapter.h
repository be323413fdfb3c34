// PEFT's LoRA adapter folder (docs/lora.md): adapter_config.json (peft_type LORA, r,
// lora_alpha, target_modules, target_parameters, base_model_name_or_path) and
// adapter_model.safetensors, with PEFT's tensor names:
//   linear weight:  base_model.model.<module>.lora_A.weight          [r, in]
//                   base_model.model.<module>.lora_B.weight          [out, r]
//   expert stack:   base_model.model.<layer>.mlp.experts.lora_A.weight  [E*r, in]
//                   base_model.model.<layer>.mlp.experts.lora_B.weight  [out, r*E]
//     (when both stacks of a layer are adapted, PEFT nests its wrappers: gate_up_proj's pair is
//     under ...mlp.experts.base_layer., down_proj's directly under ...mlp.experts.)
// PeftModel.from_pretrained(base, folder) loads what write_peft_adapter writes, and
// read_peft_adapter reads what PEFT's save_pretrained writes.
#pragma once

#include <string>
#include <vector>

#include "titan/checkpoint/tensor_layout.h"
#include "titan/config/trainer_config.h"
#include "titan/lora/lora_targets.h"
#include "titan/models/model.h"

namespace titan::lora {

// PEFT's file name of the A (`a` true) or B tensor of a target.
std::string peft_key(const Target& target, bool a, const std::vector<Target>& targets);

// PEFT's layout of a native adapter tensor, and back (expert stacks are reshaped; linear
// adapters are the same).
at::Tensor to_peft_layout(const Target& target, bool a, const at::Tensor& native);
at::Tensor from_peft_layout(const Target& target, bool a, const at::Tensor& peft, int64_t experts);

// Writes the folder (a collective with a split `layout`: each adapter tensor is gathered in
// turn; the coordinator writes, into a temporary sibling renamed into place). Adapters are
// written in float32.
void write_peft_adapter(const std::string& dir, models::ModelTensors& model,
                        const std::vector<Target>& targets, const config::LoraConfig& lora,
                        const std::string& base_model_name,
                        const checkpoint::TensorLayout& layout = checkpoint::whole_tensors());

// Reads a PEFT folder into the model's adapters (whole tensors: before parallelism splits
// them). Its r and lora_alpha must be lora.rank and lora.alpha, and its tensors exactly the
// targets' with their shapes; anything else throws titan::Error naming the file and tensor.
void read_peft_adapter(const std::string& dir, models::ModelTensors& model,
                       const std::vector<Target>& targets, const config::LoraConfig& lora);

}  // namespace titan::lora
