#include "titan/models/qwen3/model.h"

namespace titan::models {

DecoderConfig qwen3_decoder_config(const Qwen3Args& a, const Qwen3Options& options) {
  a.validate("Qwen3 model");
  DecoderConfig c;
  c.vocab_size = a.vocab_size;
  c.hidden_size = a.hidden_size;
  c.num_layers = a.num_hidden_layers;
  c.attention = {a.hidden_size,    a.num_attention_heads, a.num_key_value_heads, a.head_dim,
                 a.attention_bias, /*qk_norm=*/true,      a.rms_norm_eps};
  c.intermediate_size = a.intermediate_size;
  c.moe = {a.hidden_size, a.num_experts, a.num_experts_per_tok, a.moe_intermediate_size,
           a.norm_topk_prob};
  for (int64_t i = 0; i < a.num_hidden_layers; ++i) c.sparse.push_back(a.is_sparse_layer(i));
  c.norm_eps = a.rms_norm_eps;
  c.rope.head_dim = a.head_dim;
  c.rope.theta = a.rope_theta;
  c.rope.type = a.rope_type;
  c.rope.factor = a.rope_factor;
  c.rope.original_max_position_embeddings = a.rope_original_max_position_embeddings > 0
                                                ? a.rope_original_max_position_embeddings
                                                : a.max_position_embeddings;
  c.rope.attention_factor = a.rope_attention_factor;
  c.rope.beta_fast = a.rope_beta_fast;
  c.rope.beta_slow = a.rope_beta_slow;
  c.rope.truncate = a.rope_truncate;
  c.tie_word_embeddings = a.tie_word_embeddings;
  c.pad_token_id = a.pad_token_id;
  c.initializer_range = a.initializer_range;
  c.balancing = options;
  return c;
}

}  // namespace titan::models
