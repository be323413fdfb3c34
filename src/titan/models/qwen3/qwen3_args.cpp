// Qwen3Args: its checks, and the resolution of model.flavor / model.hf_assets_path into the
// dimensions a job trains (the rule in common/flavor_resolution.h, flavor table in
// qwen3_flavors.cpp, config.json in qwen3_hf_config.cpp).
#include "titan/models/qwen3/qwen3_args.h"

#include "titan/common/error.h"
#include "titan/models/common/flavor_resolution.h"

namespace titan::models {
namespace {

std::string format_list(const std::vector<int64_t>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i)
    out.append(i ? "," : "").append(std::to_string(values[i]));
  return out + "]";
}

}  // namespace

bool Qwen3Args::is_sparse_layer(int64_t layer) const {
  if (num_experts <= 0) return false;
  for (int64_t only : mlp_only_layers) {
    if (only == layer) return false;
  }
  return (layer + 1) % decoder_sparse_step == 0;
}

void Qwen3Args::validate(const std::string& source) const {
  auto positive = [&](const char* name, int64_t value) {
    TITAN_CHECK(value > 0, source, ": ", name, " must be positive, got ", value);
  };
  TITAN_CHECK(model_type == "qwen3" || model_type == "qwen3_moe", source, ": model_type '",
              model_type, "' is not qwen3 or qwen3_moe");
  positive("vocab_size", vocab_size);
  positive("hidden_size", hidden_size);
  positive("num_hidden_layers", num_hidden_layers);
  positive("num_attention_heads", num_attention_heads);
  positive("num_key_value_heads", num_key_value_heads);
  positive("head_dim", head_dim);
  TITAN_CHECK(head_dim % 2 == 0, source, ": head_dim must be even for RoPE, got ", head_dim);
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
  bool any_dense = !is_moe();
  for (int64_t i = 0; i < num_hidden_layers; ++i) any_dense = any_dense || !is_sparse_layer(i);
  if (any_dense) positive("intermediate_size", intermediate_size);
  if (is_moe()) {
    positive("num_experts_per_tok", num_experts_per_tok);
    positive("moe_intermediate_size", moe_intermediate_size);
    positive("decoder_sparse_step", decoder_sparse_step);
    TITAN_CHECK(num_experts_per_tok <= num_experts, source, ": num_experts_per_tok (",
                num_experts_per_tok, ") exceeds num_experts (", num_experts, ")");
  }
  if (rope_type == "yarn") {
    TITAN_CHECK(rope_factor > 0, source, ": rope factor must be positive, got ", rope_factor);
    positive("original_max_position_embeddings", rope_original_max_position_embeddings);
  }
}

void check_same_architecture(const Qwen3Args& f, const std::string& flavor_name, const Qwen3Args& c,
                             const std::string& file_path) {
  const FlavorComparison compare(flavor_name, file_path);
  compare.strings("model_type", f.model_type, c.model_type);
  compare.ints("vocab_size", f.vocab_size, c.vocab_size);
  compare.ints("hidden_size", f.hidden_size, c.hidden_size);
  compare.ints("num_hidden_layers", f.num_hidden_layers, c.num_hidden_layers);
  compare.ints("num_attention_heads", f.num_attention_heads, c.num_attention_heads);
  compare.ints("num_key_value_heads", f.num_key_value_heads, c.num_key_value_heads);
  compare.ints("head_dim", f.head_dim, c.head_dim);
  compare.doubles("rms_norm_eps", f.rms_norm_eps, c.rms_norm_eps);
  compare.doubles("rope_theta", f.rope_theta, c.rope_theta);
  compare.strings("rope_type", f.rope_type, c.rope_type);
  if (f.rope_type == "yarn") {
    compare.doubles("rope factor", f.rope_factor, c.rope_factor);
    compare.ints("original_max_position_embeddings", f.rope_original_max_position_embeddings,
                 c.rope_original_max_position_embeddings);
  }
  compare.bools("tie_word_embeddings", f.tie_word_embeddings, c.tie_word_embeddings);
  compare.bools("attention_bias", f.attention_bias, c.attention_bias);
  bool any_dense = false;
  for (int64_t i = 0; i < f.num_hidden_layers; ++i) any_dense = any_dense || !f.is_sparse_layer(i);
  if (any_dense) compare.ints("intermediate_size", f.intermediate_size, c.intermediate_size);
  compare.ints("num_experts", f.num_experts, c.num_experts);
  if (f.is_moe()) {
    compare.ints("num_experts_per_tok", f.num_experts_per_tok, c.num_experts_per_tok);
    compare.ints("moe_intermediate_size", f.moe_intermediate_size, c.moe_intermediate_size);
    compare.bools("norm_topk_prob", f.norm_topk_prob, c.norm_topk_prob);
    compare.ints("decoder_sparse_step", f.decoder_sparse_step, c.decoder_sparse_step);
    compare.strings("mlp_only_layers", format_list(f.mlp_only_layers),
                    format_list(c.mlp_only_layers));
  }
}

Qwen3Args resolve_qwen3_args(const config::ModelConfig& model) {
  return resolve_flavor<Qwen3Args>(model, qwen3_flavor, qwen3_args_from_hf_config,
                                   check_same_architecture);
}

}  // namespace titan::models
