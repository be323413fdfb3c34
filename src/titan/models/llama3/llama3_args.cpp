// Llama3Args: its checks, and model.flavor / model.hf_assets_path resolution (the rule in
// common/flavor_resolution.h; flavors in llama3_flavors.cpp, config.json in llama3_hf_config.cpp).
#include "titan/models/llama3/llama3_args.h"

#include "titan/common/error.h"
#include "titan/models/common/flavor_resolution.h"

namespace titan::models {

Llama3Args::Llama3Args() {
  vocab_size = 128256;
  hidden_size = 4096;
  intermediate_size = 14336;
  num_hidden_layers = 32;
  num_attention_heads = 32;
  num_key_value_heads = 8;
  head_dim = 128;
  rms_norm_eps = 1e-5;
  rope_theta = 500000.0;
  rope_type = "llama3";
  max_position_embeddings = 131072;
}

void Llama3Args::validate(const std::string& source) const {
  auto positive = [&](const char* name, int64_t value) {
    TITAN_CHECK(value > 0, source, ": ", name, " must be positive, got ", value);
  };
  validate_decoder_args(*this, source);
  // LlamaConfig.validate_architecture refuses this even with an explicit head_dim.
  TITAN_CHECK(hidden_size % num_attention_heads == 0, source, ": hidden_size (", hidden_size,
              ") must be a multiple of num_attention_heads (", num_attention_heads, ")");
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
  compare_decoder_args(compare, f, c);
  if (f.rope_type == "llama3") {
    compare.doubles("rope factor", f.rope_factor, c.rope_factor);
    compare.doubles("rope low_freq_factor", f.rope_low_freq_factor, c.rope_low_freq_factor);
    compare.doubles("rope high_freq_factor", f.rope_high_freq_factor, c.rope_high_freq_factor);
    compare.ints("original_max_position_embeddings", f.rope_original_max_position_embeddings,
                 c.rope_original_max_position_embeddings);
  }
}

Llama3Args resolve_llama3_args(const config::ModelConfig& model) {
  return resolve_flavor<Llama3Args>(model, llama3_flavor, llama3_args_from_hf_config,
                                    check_same_architecture);
}

}  // namespace titan::models
