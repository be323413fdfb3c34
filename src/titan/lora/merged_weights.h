// The weights of a merged LoRA export (docs/lora.md): every base weight, each adapted one as
// W + (B A) * alpha / r (per expert for an expert stack), the NF4 ones dequantised; no adapter
// tensors. What PEFT's merge_and_unload() leaves, so that AutoModelForCausalLM loads it.
#pragma once

#include "titan/checkpoint/hf_export.h"
#include "titan/checkpoint/tensor_layout.h"
#include "titan/lora/lora_model.h"

namespace titan::lora {

// Gathers through `layout` (a collective with a split one, in the same order on every rank).
// `model` must outlive the result.
checkpoint::NativeTensors merged_weights(models::ModelTensors& model, const LoraSetup& setup,
                                         const checkpoint::TensorLayout& layout);

}  // namespace titan::lora
