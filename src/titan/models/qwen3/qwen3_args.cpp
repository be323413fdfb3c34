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

Qwen3Args::Qwen3Args() {
  vocab_size = 151936;
  hidden_size = 4096;
  intermediate_size = 22016;
  num_hidden_layers = 32;
  num_attention_heads = 32;
  num_key_value_heads = 32;
  head_dim = 128;
  max_position_embeddings = 32768;
}

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
  bool any_dense = !is_moe();
  for (int64_t i = 0; i < num_hidden_layers; ++i) any_dense = any_dense || !is_sparse_layer(i);
  validate_decoder_args(*this, source, /*check_intermediate=*/any_dense);
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
  bool any_dense = false;
  for (int64_t i = 0; i < f.num_hidden_layers; ++i) any_dense = any_dense || !f.is_sparse_layer(i);
  compare_decoder_args(compare, f, c, /*compare_intermediate=*/any_dense);
  if (f.rope_type == "yarn") {
    compare.doubles("rope factor", f.rope_factor, c.rope_factor);
    compare.ints("original_max_position_embeddings", f.rope_original_max_position_embeddings,
                 c.rope_original_max_position_embeddings);
  }
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
