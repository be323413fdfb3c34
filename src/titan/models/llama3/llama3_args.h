// Llama3Args: every architectural number of a Llama 3 model (docs/llama3.md), the named
// flavors, and the two directions to and from a Hugging Face config.json (model_type "llama").
// Reading follows the installed transformers 5.17 LlamaConfig, its defaults for absent keys
// included; writing emits keys both Transformers v4 and v5 read.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "titan/config/trainer_config.h"
#include "titan/models/common/decoder_args.h"

namespace titan::models {

// The common numbers (common/decoder_args.h) and Llama 3's RoPE scaling. rope_type is "default"
// or "llama3" (Llama 3.1's scaling of the low frequencies, common/rope.h).
struct Llama3Args : DecoderArgs {
  Llama3Args();

  double rope_factor = 8.0;
  double rope_low_freq_factor = 1.0;
  double rope_high_freq_factor = 4.0;
  int64_t rope_original_max_position_embeddings = 8192;

  // Throws titan::Error naming the field when a value is impossible.
  void validate(const std::string& source) const;
};

// "debugmodel", "1B" (Llama 3.2), "3B" (3.2), "8B" (3.1), "70B" (3.1); throws naming the
// flavor and listing the known ones.
Llama3Args llama3_flavor(const std::string& name);
std::vector<std::string> llama3_flavor_names();

// Parses a Hugging Face config.json (v4 or v5 keys); `source` names the file in errors.
// mlp_bias true, a hidden_act other than silu and a RoPE type other than default or llama3 are
// one error naming the key.
Llama3Args llama3_args_from_hf_config(const nlohmann::json& config, const std::string& source);
// The config.json Transformers v4 and v5 both load; `dtype` is the weights dtype.
nlohmann::json llama3_args_to_hf_config(const Llama3Args& args, const std::string& dtype);

// Throws naming the first differing architectural field and both values.
void check_same_architecture(const Llama3Args& flavor, const std::string& flavor_name,
                             const Llama3Args& file, const std::string& file_path);

// model.flavor / model.hf_assets_path -> the args a job trains (common/flavor_resolution.h).
Llama3Args resolve_llama3_args(const config::ModelConfig& model);

}  // namespace titan::models
