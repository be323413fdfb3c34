// Llama3Args <-> Hugging Face config.json. Reading follows transformers 5.17's LlamaConfig, its
// defaults for absent keys included; writing emits keys both v4 and v5 read.
#include "titan/common/error.h"
#include "titan/models/common/hf_config_reader.h"
#include "titan/models/llama3/llama3_args.h"

namespace titan::models {
namespace {

// The RoPE dictionary as transformers settles it, then llama3's keys, which it requires.
void read_rope(const HfConfigReader& reader, Llama3Args& a) {
  const HfRopeParameters rope = read_hf_rope_parameters(reader);
  a.rope_theta = rope.theta;
  a.rope_type = rope.type;
  const HfConfigReader nested(rope.params, reader.source() + " (" + rope.key + ")");
  // HF rotates the first partial_rotary_factor of each head only, from either place.
  for (const HfConfigReader* where : {&reader, &nested}) {
    double partial = 1.0;
    where->read_double("partial_rotary_factor", partial);
    TITAN_CHECK(partial == 1.0, where->source(), ": partial_rotary_factor ", partial,
                " is not supported (Llama rotates whole heads)");
  }
  if (a.rope_type == "default") return;
  TITAN_CHECK(a.rope_type == "llama3", reader.source(), ": ", rope.key, ".rope_type '", a.rope_type,
              "' is not supported (supported: default, llama3)");
  for (const char* key : {"factor", "low_freq_factor", "high_freq_factor"}) {
    TITAN_CHECK(nested.has(key), reader.source(), ": ", rope.key, ".", key,
                " is missing (rope_type llama3 needs factor, low_freq_factor and "
                "high_freq_factor)");
  }
  nested.read_double("factor", a.rope_factor);
  nested.read_double("low_freq_factor", a.rope_low_freq_factor);
  nested.read_double("high_freq_factor", a.rope_high_freq_factor);
  a.rope_original_max_position_embeddings = a.max_position_embeddings;
  nested.read_int("original_max_position_embeddings", a.rope_original_max_position_embeddings);
  // standardize_rope_params, which runs again when the frequencies are computed, lets a
  // top-level key win over the dictionary's.
  reader.read_int("original_max_position_embeddings", a.rope_original_max_position_embeddings);
}

}  // namespace

Llama3Args llama3_args_from_hf_config(const nlohmann::json& config, const std::string& source) {
  TITAN_CHECK(config.is_object(), source, ": config.json must be a JSON object");
  const HfConfigReader r(config, source);
  TITAN_CHECK(r.has("model_type"), source, ": key 'model_type' is missing (need llama)");
  std::string model_type;
  r.read_string("model_type", model_type);
  TITAN_CHECK(model_type == "llama", source, ": model_type '", model_type,
              "' is not supported (need llama)");

  // LlamaConfig's class defaults (transformers 5.17).
  Llama3Args a;
  a.vocab_size = 32000;
  a.intermediate_size = 11008;
  a.max_position_embeddings = 2048;
  a.rms_norm_eps = 1e-6;
  a.bos_token_id = 1;
  a.eos_token_id = {2};
  a.dtype = "float32";
  DecoderKeyDefaults defaults;  // None -> num_attention_heads, hidden_size // heads
  defaults.num_key_value_heads = [](const DecoderArgs& d) { return d.num_attention_heads; };
  defaults.head_dim = [](const DecoderArgs& d) { return d.hidden_size / d.num_attention_heads; };
  read_decoder_args(r, a, defaults, "Llama");
  read_rope(r, a);

  bool mlp_bias = false;
  r.read_bool("mlp_bias", mlp_bias);
  TITAN_CHECK(!mlp_bias, source, ": mlp_bias=true is not supported (the feed-forward has no bias)");
  a.validate(source);
  return a;
}

nlohmann::json llama3_args_to_hf_config(const Llama3Args& a, const std::string& dtype) {
  using nlohmann::json;
  json c = json::object();
  c["architectures"] = json::array({"LlamaForCausalLM"});
  c["model_type"] = "llama";
  c["mlp_bias"] = false;
  c["pretraining_tp"] = 1;
  json scaling = nullptr;
  if (a.rope_type == "llama3") {
    scaling = {{"rope_type", "llama3"},
               {"factor", a.rope_factor},
               {"low_freq_factor", a.rope_low_freq_factor},
               {"high_freq_factor", a.rope_high_freq_factor},
               {"original_max_position_embeddings", a.rope_original_max_position_embeddings}};
  }
  write_decoder_args(c, a, dtype, scaling);
  return c;
}

}  // namespace titan::models
