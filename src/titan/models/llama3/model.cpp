#include "titan/models/llama3/model.h"

namespace titan::models {

DecoderConfig llama3_decoder_config(const Llama3Args& a) {
  a.validate("Llama 3 model");
  DecoderConfig c;
  c.vocab_size = a.vocab_size;
  c.hidden_size = a.hidden_size;
  c.num_layers = a.num_hidden_layers;
  c.attention = {a.hidden_size,    a.num_attention_heads, a.num_key_value_heads, a.head_dim,
                 a.attention_bias, /*qk_norm=*/false,     a.rms_norm_eps};
  c.intermediate_size = a.intermediate_size;
  c.sparse.assign(a.num_hidden_layers, false);
  c.norm_eps = a.rms_norm_eps;
  c.rope.head_dim = a.head_dim;
  c.rope.theta = a.rope_theta;
  c.rope.type = a.rope_type;
  c.rope.factor = a.rope_factor;
  c.rope.low_freq_factor = a.rope_low_freq_factor;
  c.rope.high_freq_factor = a.rope_high_freq_factor;
  c.rope.original_max_position_embeddings = a.rope_original_max_position_embeddings;
  c.tie_word_embeddings = a.tie_word_embeddings;
  c.pad_token_id = a.pad_token_id;
  c.initializer_range = a.initializer_range;
  return c;
}

}  // namespace titan::models
