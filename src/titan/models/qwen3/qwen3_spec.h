// The "qwen3" ModelSpec: builders (from the trainer config or a config.json), the
// state-dict adapter and the FLOPs counter of the native Qwen3 / Qwen3-MoE model.
#pragma once

#include "titan/models/model_spec.h"

namespace titan::models {

ModelSpec qwen3_model_spec();

// Training FLOPs per token, torchtitan's convention (QWEN3_SPEC.md section 7), counted from
// the parameter shapes: 6 * N_active + 12 * L * n_heads * head_dim * seq_len. N_active
// excludes the input embedding unless it is tied (then it counts once, as the head) and
// weights routed-expert parameters by k / E.
double qwen3_flops_per_token(const Model& model, int64_t seq_len);

}  // namespace titan::models
