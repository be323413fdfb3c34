#include "titan/models/common/decoder_args.h"

#include "titan/common/error.h"

namespace titan::models {

void read_decoder_args(const HfConfigReader& r, DecoderArgs& a, const DecoderKeyDefaults& defaults,
                       const std::string& family) {
  const std::string& source = r.source();
  r.read_int("vocab_size", a.vocab_size);
  r.read_int("hidden_size", a.hidden_size);
  r.read_int("intermediate_size", a.intermediate_size);
  r.read_int("num_hidden_layers", a.num_hidden_layers);
  r.read_int("num_attention_heads", a.num_attention_heads);
  TITAN_CHECK(a.num_attention_heads > 0, source, ": num_attention_heads must be positive, got ",
              a.num_attention_heads);
  a.num_key_value_heads = defaults.num_key_value_heads(a);
  r.read_int("num_key_value_heads", a.num_key_value_heads);
  a.head_dim = defaults.head_dim(a);
  r.read_int("head_dim", a.head_dim);
  r.read_double("rms_norm_eps", a.rms_norm_eps);
  r.read_int("max_position_embeddings", a.max_position_embeddings);
  r.read_bool("tie_word_embeddings", a.tie_word_embeddings);
  r.read_bool("attention_bias", a.attention_bias);
  r.read_double("initializer_range", a.initializer_range);
  // An explicit null is no token (a class default applies to absent keys only).
  if (r.contains("bos_token_id")) a.bos_token_id.reset();
  if (r.contains("eos_token_id")) a.eos_token_id.clear();
  r.read_optional_int("bos_token_id", a.bos_token_id);
  r.read_int_list("eos_token_id", a.eos_token_id);
  r.read_optional_int("pad_token_id", a.pad_token_id);
  r.read_string("torch_dtype", a.dtype);
  r.read_string("dtype", a.dtype);  // v5 key wins over the legacy one
  std::string act = "silu";
  r.read_string("hidden_act", act);
  TITAN_CHECK(act == "silu", source, ": hidden_act '", act, "' is not supported (", family,
              " uses silu)");
}

void write_decoder_args(nlohmann::json& c, const DecoderArgs& a, const std::string& dtype,
                        const nlohmann::json& rope_scaling) {
  c["attention_bias"] = a.attention_bias;
  c["attention_dropout"] = 0.0;
  write_hf_token_ids(c, a.bos_token_id, a.eos_token_id, a.pad_token_id);
  c["head_dim"] = a.head_dim;
  c["hidden_act"] = "silu";
  c["hidden_size"] = a.hidden_size;
  c["initializer_range"] = static_cast<double>(a.initializer_range);
  c["intermediate_size"] = a.intermediate_size;
  c["max_position_embeddings"] = a.max_position_embeddings;
  c["num_attention_heads"] = a.num_attention_heads;
  c["num_hidden_layers"] = a.num_hidden_layers;
  c["num_key_value_heads"] = a.num_key_value_heads;
  c["rms_norm_eps"] = static_cast<double>(a.rms_norm_eps);
  write_hf_rope(c, a.rope_theta, a.rope_type, rope_scaling);
  c["tie_word_embeddings"] = a.tie_word_embeddings;
  c["dtype"] = dtype;
  c["torch_dtype"] = dtype;
  c["transformers_version"] = "5.17.0";
  c["use_cache"] = true;
  c["vocab_size"] = a.vocab_size;
}

void validate_decoder_args(const DecoderArgs& a, const std::string& source,
                           bool check_intermediate) {
  auto positive = [&](const char* name, int64_t value) {
    TITAN_CHECK(value > 0, source, ": ", name, " must be positive, got ", value);
  };
  positive("vocab_size", a.vocab_size);
  positive("hidden_size", a.hidden_size);
  if (check_intermediate) positive("intermediate_size", a.intermediate_size);
  positive("num_hidden_layers", a.num_hidden_layers);
  positive("num_attention_heads", a.num_attention_heads);
  positive("num_key_value_heads", a.num_key_value_heads);
  positive("head_dim", a.head_dim);
  TITAN_CHECK(a.head_dim % 2 == 0, source, ": head_dim must be even for RoPE, got ", a.head_dim);
  TITAN_CHECK(a.num_attention_heads % a.num_key_value_heads == 0, source, ": num_attention_heads (",
              a.num_attention_heads, ") must be a multiple of num_key_value_heads (",
              a.num_key_value_heads, ")");
  TITAN_CHECK(a.rms_norm_eps > 0, source, ": rms_norm_eps must be positive, got ", a.rms_norm_eps);
  TITAN_CHECK(a.rope_theta > 0, source, ": rope_theta must be positive, got ", a.rope_theta);
  TITAN_CHECK(a.initializer_range >= 0, source, ": initializer_range must be >= 0, got ",
              a.initializer_range);
  if (a.pad_token_id) {
    TITAN_CHECK(*a.pad_token_id >= 0 && *a.pad_token_id < a.vocab_size, source, ": pad_token_id ",
                *a.pad_token_id, " is outside the vocabulary [0, ", a.vocab_size, ")");
  }
}

void compare_decoder_args(const FlavorComparison& compare, const DecoderArgs& f,
                          const DecoderArgs& c, bool compare_intermediate) {
  compare.ints("vocab_size", f.vocab_size, c.vocab_size);
  compare.ints("hidden_size", f.hidden_size, c.hidden_size);
  if (compare_intermediate)
    compare.ints("intermediate_size", f.intermediate_size, c.intermediate_size);
  compare.ints("num_hidden_layers", f.num_hidden_layers, c.num_hidden_layers);
  compare.ints("num_attention_heads", f.num_attention_heads, c.num_attention_heads);
  compare.ints("num_key_value_heads", f.num_key_value_heads, c.num_key_value_heads);
  compare.ints("head_dim", f.head_dim, c.head_dim);
  compare.doubles("rms_norm_eps", f.rms_norm_eps, c.rms_norm_eps);
  compare.doubles("rope_theta", f.rope_theta, c.rope_theta);
  compare.strings("rope_type", f.rope_type, c.rope_type);
  compare.bools("tie_word_embeddings", f.tie_word_embeddings, c.tie_word_embeddings);
  compare.bools("attention_bias", f.attention_bias, c.attention_bias);
}

DecoderConfig decoder_config_of(const DecoderArgs& a, bool qk_norm) {
  DecoderConfig c;
  c.vocab_size = a.vocab_size;
  c.hidden_size = a.hidden_size;
  c.num_layers = a.num_hidden_layers;
  c.attention = {a.hidden_size, a.num_attention_heads, a.num_key_value_heads,
                 a.head_dim,    a.attention_bias,      qk_norm,
                 a.rms_norm_eps};
  c.intermediate_size = a.intermediate_size;
  c.sparse.assign(a.num_hidden_layers, false);
  c.norm_eps = a.rms_norm_eps;
  c.rope.head_dim = a.head_dim;
  c.rope.theta = a.rope_theta;
  c.rope.type = a.rope_type;
  c.tie_word_embeddings = a.tie_word_embeddings;
  c.pad_token_id = a.pad_token_id;
  c.initializer_range = a.initializer_range;
  return c;
}

}  // namespace titan::models
