// The "qwen3" ModelSpec: builders (from the trainer config or a config.json), parallelize,
// post_optimizer_build, the state-dict adapter and the FLOPs counter of the native Qwen3 /
// Qwen3-MoE model.
#pragma once

#include "titan/models/model_spec.h"

namespace titan::models {

ModelSpec qwen3_model_spec();

// Applies activation_checkpoint.* to the blocks as wrappers, then makes the data-parallel units
// torchtitan makes: the embedding, each block, the final norm with the head (not resharded
// after forward: the loss uses the head right after); a tied embedding shares the head's unit.
void parallelize_qwen3(Model& model, const config::TrainerConfig& config,
                       ParallelContext& parallel);

// With expert-bias balancing: after every optimizer step, sums each MoE layer's token counts
// over the data-parallel ranks, updates its expert bias and zeroes the counts (torchtitan's
// post_optimizer_build_fn). Nothing for other models.
void qwen3_post_optimizer_build(Model& model, const OptimizerHooks& hooks);

// Training FLOPs per token, torchtitan's convention (docs/qwen3.md section 7), counted from
// the parameter shapes: 6 * N_active + 12 * L * n_heads * head_dim * seq_len. N_active
// excludes the input embedding unless it is tied (then it counts once, as the head) and
// weights routed-expert parameters by k / E.
double qwen3_flops_per_token(Model& model, int64_t seq_len);

}  // namespace titan::models
