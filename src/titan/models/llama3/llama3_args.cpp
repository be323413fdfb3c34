// Llama3Args: its checks, and model.flavor / model.hf_assets_path resolution (the rule in
// common/flavor_resolution.h; flavors in llama3_flavors.cpp, config.json in llama3_hf_config.cpp).
#include "titan/models/llama3/llama3_args.h"

#include "titan/common/error.h"
#include "titan/models/common/flavor_resolution.h"

namespace titan::models {

void Llama3Args::validate(const std::string& source) const {
  auto positive = [&](const char* name, int64_t value) {
    TITAN_CHECK(value > 0, source, ": ", name, " must be positive, got ", value);
  };
  positive("vocab_size", vocab_size);
  positive("hidden_size", hidden_size);
  positive("intermediate_size", intermediate_size);
  positive("num_hidden_layers", num_hidden_layers);
  positive("num_attention_heads", num_attention_heads);
  positive("num_key_value_heads", num_key_value_heads);
  positive("head_dim", head_dim);
  TITAN_CHECK(head_dim % 2 == 0, source, ": head_dim must be even for RoPE, got ", head_dim);
  // LlamaConfig.validate_architecture refuses this even with an explicit head_dim.
  TITAN_CHECK(hidden_size % num_attention_heads == 0, source, ": hidden_size (", hidden_size,
              ") must be a multiple of num_attention_heads (", num_attention_heads, ")");
  TITAN_CHECK(num_attention_heads % num_key_value_heads == 0, source, ": num_attention_heads (",
              num_attention_heads, ") must be a multiple of num_key_value_heads (",
              num_key_value_heads, ")");
  TITAN_CHECK(rms_norm_eps > 0, source, ": rms_norm_eps must be positive, got ", rms_norm_eps);
  TITAN_CHECK(rope_theta > 0, source, ": rope_theta must be positive, got ", rope_theta);
  TITAN_CHECK(initializer_range >= 0, source, ": initializer_range must be >= 0, got ",
              initializer_range);
  if (pad_token_id) {
    TITAN_CHECK(*pad_token_id >= 0 && *pad_token_id < vocab_size, source, ": pad_token_id ",
                *pad_token_id, " is outside the vocabulary [0, ", vocab_size, ")");
  }
  TITAN_CHECK(rope_type == "default" || rope_type == "llama3", source, ": rope_type '", rope_type,
              "' is not supported (supported: default, llama3)");
  if (rope_type == "llama3") {
    TITAN_CHECK(rope_factor > 0, source, ": rope factor must be positive, got ", rope_factor);
    positive("original_max_position_embeddings", rope_original_max_position_embeddings);
    TITAN_CHECK(rope_high_freq_factor > rope_low_freq_factor, source, ": rope high_freq_factor (",
                rope_high_freq_factor, ") must be greater than low_freq_factor (",
                rope_low_freq_factor, ")");
  }
}

void check_same_architecture(const Llama3Args& f, const std::string& flavor_name,
                             const Llama3Args& c, const std::string& file_path) {
  const FlavorComparison compare(flavor_name, file_path);
  compare.ints("vocab_size", f.vocab_size, c.vocab_size);
  compare.ints("hidden_size", f.hidden_size, c.hidden_size);
  compare.ints("intermediate_size", f.intermediate_size, c.intermediate_size);
  compare.ints("num_hidden_layers", f.num_hidden_layers, c.num_hidden_layers);
  compare.ints("num_attention_heads", f.num_attention_heads, c.num_attention_heads);
  compare.ints("num_key_value_heads", f.num_key_value_heads, c.num_key_value_heads);
  compare.ints("head_dim", f.head_dim, c.head_dim);
  compare.doubles("rms_norm_eps", f.rms_norm_eps, c.rms_norm_eps);
  compare.doubles("rope_theta", f.rope_theta, c.rope_theta);
  compare.strings("rope_type", f.rope_type, c.rope_type);
  if (f.rope_type == "llama3") {
    compare.doubles("rope factor", f.rope_factor, c.rope_factor);
    compare.doubles("rope low_freq_factor", f.rope_low_freq_factor, c.rope_low_freq_factor);
    compare.doubles("rope high_freq_factor", f.rope_high_freq_factor, c.rope_high_freq_factor);
    compare.ints("original_max_position_embeddings", f.rope_original_max_position_embeddings,
                 c.rope_original_max_position_embeddings);
  }
  compare.bools("tie_word_embeddings", f.tie_word_embeddings, c.tie_word_embeddings);
  compare.bools("attention_bias", f.attention_bias, c.attention_bias);
}

Llama3Args resolve_llama3_args(const config::ModelConfig& model) {
  return resolve_flavor<Llama3Args>(model, llama3_flavor, llama3_args_from_hf_config,
                                    check_same_architecture);
}

}  // namespace titan::models
