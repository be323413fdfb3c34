#include "titan/models/qwen3/model.h"

#include "titan/models/common/decoder_args.h"

namespace titan::models {

DecoderConfig qwen3_decoder_config(const Qwen3Args& a, const Qwen3Options& options) {
  a.validate("Qwen3 model");
  DecoderConfig c = decoder_config_of(a, /*qk_norm=*/true);
  c.moe = {a.hidden_size, a.num_experts, a.num_experts_per_tok, a.moe_intermediate_size,
           a.norm_topk_prob};
  for (int64_t i = 0; i < a.num_hidden_layers; ++i) c.sparse[i] = a.is_sparse_layer(i);
  c.rope.factor = a.rope_factor;
  c.rope.original_max_position_embeddings = a.rope_original_max_position_embeddings > 0
                                                ? a.rope_original_max_position_embeddings
                                                : a.max_position_embeddings;
  c.rope.attention_factor = a.rope_attention_factor;
  c.rope.beta_fast = a.rope_beta_fast;
  c.rope.beta_slow = a.rope_beta_slow;
  c.rope.truncate = a.rope_truncate;
  c.balancing = options;
  return c;
}

}  // namespace titan::models
