// Qwen3Args: every architectural number of a Qwen3 / Qwen3-MoE model, the named flavors, and
// the two directions to and from a Hugging Face config.json (docs/qwen3.md sections 5.3, 5.4).
// Reading follows the installed transformers 5.17 classes exactly, including their defaults
// for absent keys; writing emits keys both Transformers v4 and v5 read.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "titan/config/trainer_config.h"
#include "titan/models/common/decoder_args.h"

namespace titan::models {

// The common numbers (common/decoder_args.h) and Qwen3's own. rope_type is "default" or "yarn"
// (docs/qwen3.md section 2.3).
struct Qwen3Args : DecoderArgs {
  Qwen3Args();

  std::string model_type = "qwen3";  // "qwen3" (dense) | "qwen3_moe"
  double rope_factor = 1.0;
  int64_t rope_original_max_position_embeddings = 0;  // yarn only; 0 = max_position_embeddings
  std::optional<double> rope_attention_factor;        // yarn only; unset = 0.1 ln(factor) + 1
  double rope_beta_fast = 32.0;
  double rope_beta_slow = 1.0;
  bool rope_truncate = true;
  // MoE (num_experts == 0 means dense).
  int64_t num_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;
  bool norm_topk_prob = false;
  int64_t decoder_sparse_step = 1;
  std::vector<int64_t> mlp_only_layers;
  double router_aux_loss_coef = 0.001;
  bool output_router_logits = false;

  bool is_moe() const { return num_experts > 0; }
  // Layer i uses the routed experts (else the dense SwiGLU MLP with intermediate_size).
  bool is_sparse_layer(int64_t layer) const;
  // Throws titan::Error naming the field when a value is impossible (non-positive sizes,
  // heads not divisible by kv heads, odd head_dim, top-k > experts, ...).
  void validate(const std::string& source) const;
};

// Named flavors: "debugmodel", "debugmodel_moe", "0.6B", "1.7B", "4B", "8B", "14B", "32B",
// "30B-A3B", "235B-A22B". Throws naming the flavor and listing the known ones.
Qwen3Args qwen3_flavor(const std::string& name);
std::vector<std::string> qwen3_flavor_names();

// Parses a Hugging Face config.json (v4 or v5 keys). `source` names the file in errors.
Qwen3Args qwen3_args_from_hf_config(const nlohmann::json& config, const std::string& source);
// The config.json Transformers v4 and v5 both load (docs/qwen3.md section 8); `dtype` is the
// weights dtype ("float32", "bfloat16", "float16").
nlohmann::json qwen3_args_to_hf_config(const Qwen3Args& args, const std::string& dtype);

// Throws naming the first differing architectural field and both values. Token ids, dtype and
// max_position_embeddings are not architecture and are not compared.
void check_same_architecture(const Qwen3Args& flavor, const std::string& flavor_name,
                             const Qwen3Args& file, const std::string& file_path);

// The args for training: model.flavor "auto" reads <hf_assets_path>/config.json (which must
// exist); a named flavor is checked against that file when present and takes its token ids
// and max_position_embeddings from it; without a file, the flavor alone.
Qwen3Args resolve_qwen3_args(const config::ModelConfig& model);

}  // namespace titan::models
