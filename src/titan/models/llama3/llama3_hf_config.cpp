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
  a.hidden_size = 4096;
  a.intermediate_size = 11008;
  a.num_hidden_layers = 32;
  a.num_attention_heads = 32;
  a.max_position_embeddings = 2048;
  a.rms_norm_eps = 1e-6;
  a.tie_word_embeddings = false;
  a.bos_token_id = 1;
  a.eos_token_id = {2};
  a.dtype = "float32";

  r.read_int("vocab_size", a.vocab_size);
  r.read_int("hidden_size", a.hidden_size);
  r.read_int("intermediate_size", a.intermediate_size);
  r.read_int("num_hidden_layers", a.num_hidden_layers);
  r.read_int("num_attention_heads", a.num_attention_heads);
  TITAN_CHECK(a.num_attention_heads > 0, source, ": num_attention_heads must be positive, got ",
              a.num_attention_heads);
  a.num_key_value_heads = a.num_attention_heads;  // None -> num_attention_heads
  r.read_int("num_key_value_heads", a.num_key_value_heads);
  a.head_dim = a.hidden_size / a.num_attention_heads;  // None -> hidden_size // heads
  r.read_int("head_dim", a.head_dim);
  r.read_double("rms_norm_eps", a.rms_norm_eps);
  r.read_int("max_position_embeddings", a.max_position_embeddings);
  r.read_bool("tie_word_embeddings", a.tie_word_embeddings);
  r.read_bool("attention_bias", a.attention_bias);
  r.read_double("initializer_range", a.initializer_range);
  // An explicit null is no token (the defaults are 1 and 2 only for absent keys).
  if (r.contains("bos_token_id")) a.bos_token_id.reset();
  if (r.contains("eos_token_id")) a.eos_token_id.clear();
  r.read_optional_int("bos_token_id", a.bos_token_id);
  r.read_int_list("eos_token_id", a.eos_token_id);
  r.read_optional_int("pad_token_id", a.pad_token_id);
  r.read_string("torch_dtype", a.dtype);
  r.read_string("dtype", a.dtype);  // v5 key wins over the legacy one
  read_rope(r, a);

  std::string act = "silu";
  r.read_string("hidden_act", act);
  TITAN_CHECK(act == "silu", source, ": hidden_act '", act, "' is not supported (Llama uses silu)");
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
  c["attention_bias"] = a.attention_bias;
  c["attention_dropout"] = 0.0;
  write_hf_token_ids(c, a.bos_token_id, a.eos_token_id, a.pad_token_id);
  c["head_dim"] = a.head_dim;
  c["hidden_act"] = "silu";
  c["hidden_size"] = a.hidden_size;
  c["initializer_range"] = static_cast<double>(a.initializer_range);
  c["intermediate_size"] = a.intermediate_size;
  c["max_position_embeddings"] = a.max_position_embeddings;
  c["mlp_bias"] = false;
  c["num_attention_heads"] = a.num_attention_heads;
  c["num_hidden_layers"] = a.num_hidden_layers;
  c["num_key_value_heads"] = a.num_key_value_heads;
  c["pretraining_tp"] = 1;
  c["rms_norm_eps"] = static_cast<double>(a.rms_norm_eps);
  json scaling = nullptr;
  if (a.rope_type == "llama3") {
    scaling = {{"rope_type", "llama3"},
               {"factor", a.rope_factor},
               {"low_freq_factor", a.rope_low_freq_factor},
               {"high_freq_factor", a.rope_high_freq_factor},
               {"original_max_position_embeddings", a.rope_original_max_position_embeddings}};
  }
  write_hf_rope(c, a.rope_theta, a.rope_type, scaling);
  c["tie_word_embeddings"] = a.tie_word_embeddings;
  c["dtype"] = dtype;
  c["torch_dtype"] = dtype;
  c["transformers_version"] = "5.17.0";
  c["use_cache"] = true;
  c["vocab_size"] = a.vocab_size;
  return c;
}

}  // namespace titan::models
