// Hugging Face checkpoint <-> native names for every decoder family (docs/qwen3.md section 1.1,
// 1.2). The decoder keeps Hugging Face's parameter names (model.layers.N.self_attn.q_proj.weight,
// ...), so Qwen3, Qwen3-MoE and Llama 3 share one adapter (moved here from models/qwen3/ when
// Llama 3 came): the writer emits per-expert MoE tensors and omits a tied lm_head; the reader
// accepts per-expert and fused expert layouts and tied checkpoints with or without
// lm_head.weight, and checks every key and shape.
#pragma once

#include "titan/models/model_spec.h"

namespace titan::models {

StateDictAdapter decoder_state_dict_adapter();

}  // namespace titan::models
