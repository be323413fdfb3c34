// DecoderArgs: the numbers every decoder family's config.json holds (vocabulary, widths, layers,
// heads, head_dim, norm eps, the RoPE base and type, positions, tied embeddings, attention bias,
// init range, token ids, dtype), read, written, checked and compared here once. A family's Args
// derive from it, set their class defaults in their constructor and add their own numbers
// (Qwen3's experts, Llama 3's RoPE scaling); field access stays `args.hidden_size`.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "titan/models/common/decoder.h"
#include "titan/models/common/flavor_resolution.h"
#include "titan/models/common/hf_config_reader.h"

namespace titan::models {

struct DecoderArgs {
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;  // the dense feed-forward's
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  std::string rope_type = "default";  // the family's scalings have their own fields
  int64_t max_position_embeddings = 0;
  bool tie_word_embeddings = false;
  bool attention_bias = false;
  double initializer_range = 0.02;
  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_id;  // empty = none; config.json may hold an int or a list
  std::optional<int64_t> pad_token_id;
  std::string dtype = "bfloat16";  // weights dtype recorded in config.json
};

// The defaults a family's config class gives two keys when they are absent, computed from what
// was read before them (e.g. num_key_value_heads = num_attention_heads).
struct DecoderKeyDefaults {
  std::function<int64_t(const DecoderArgs&)> num_key_value_heads;
  std::function<int64_t(const DecoderArgs&)> head_dim;
};

// Reads the common keys over `args` (which holds the family's class defaults): absent keys keep
// them, an explicit null token id is none, a wrong JSON type is an error naming the key.
// Refuses hidden_act other than silu (naming `family`, "Qwen3 uses silu"). Not the RoPE
// dictionary, whose keys the family reads (read_hf_rope_parameters), nor validation.
void read_decoder_args(const HfConfigReader& reader, DecoderArgs& args,
                       const DecoderKeyDefaults& defaults, const std::string& family);

// Writes the common keys as both Transformers v4 and v5 read them (RoPE: `scaling` holds the
// family's own keys with rope_type; null for the default rotation). `dtype` is the weights'.
void write_decoder_args(nlohmann::json& config, const DecoderArgs& args, const std::string& dtype,
                        const nlohmann::json& rope_scaling);

// Throws titan::Error naming `source` and the field when a common value is impossible
// (non-positive sizes, odd head_dim, heads not a multiple of kv heads, pad id outside the
// vocabulary, ...). `check_intermediate`: whether the dense feed-forward is used.
void validate_decoder_args(const DecoderArgs& args, const std::string& source,
                           bool check_intermediate = true);

// Compares the common architectural fields of a flavor and a file (the first difference
// throws). Token ids, dtype and max_position_embeddings are not architecture.
void compare_decoder_args(const FlavorComparison& compare, const DecoderArgs& flavor,
                          const DecoderArgs& file, bool compare_intermediate = true);

// The DecoderConfig of the common numbers: every layer dense, the default rotation with the
// args' theta and type (a family adds its scaling, experts and balancing).
DecoderConfig decoder_config_of(const DecoderArgs& args, bool qk_norm);

}  // namespace titan::models
