// Hugging Face checkpoint <-> native names for Qwen3 (docs/qwen3.md section 1.1, 1.2): the writer
// emits per-expert MoE tensors and omits a tied lm_head; the reader accepts per-expert and
// fused expert layouts and tied checkpoints with or without lm_head.weight.
#pragma once

#include "titan/models/model_spec.h"

namespace titan::models {

StateDictAdapter qwen3_state_dict_adapter();

}  // namespace titan::models
