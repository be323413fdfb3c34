// Qwen3Args <-> Hugging Face config.json. Reading follows the installed transformers 5.17
// classes, including their defaults for absent keys; writing emits keys both v4 and v5 read.
#include "titan/common/error.h"
#include "titan/models/common/hf_config_reader.h"
#include "titan/models/qwen3/qwen3_args.h"

namespace titan::models {
namespace {

// The RoPE dictionary as transformers picks it (common/hf_config_reader.h), then YaRN's keys.
void read_rope(const HfConfigReader& reader, Qwen3Args& args) {
  const HfRopeParameters rope = read_hf_rope_parameters(reader);
  const std::string& params_key = rope.key;
  args.rope_theta = rope.theta;
  args.rope_type = rope.type;
  const HfConfigReader nested(rope.params, reader.source() + " (" + params_key + ")");
  if (args.rope_type == "default") return;
  if (args.rope_type != "yarn") {
    fail(reader.source(), ": ", params_key, ".rope_type '", args.rope_type,
         "' is not supported (supported: default, yarn)");
  }
  args.rope_original_max_position_embeddings = args.max_position_embeddings;
  nested.read_int("original_max_position_embeddings", args.rope_original_max_position_embeddings);
  args.rope_factor = static_cast<double>(args.max_position_embeddings) /
                     static_cast<double>(args.rope_original_max_position_embeddings);
  nested.read_double("factor", args.rope_factor);
  if (nested.has("attention_factor")) {
    double value = 1.0;
    nested.read_double("attention_factor", value);
    args.rope_attention_factor = value;
  }
  if (nested.has("mscale") || nested.has("mscale_all_dim")) {
    fail(reader.source(), ": ", params_key, ".mscale is not supported for Qwen3 YaRN");
  }
  // HF uses `get("beta_fast") or 32`: a zero also means the default.
  nested.read_double("beta_fast", args.rope_beta_fast);
  nested.read_double("beta_slow", args.rope_beta_slow);
  if (args.rope_beta_fast == 0) args.rope_beta_fast = 32.0;
  if (args.rope_beta_slow == 0) args.rope_beta_slow = 1.0;
  nested.read_bool("truncate", args.rope_truncate);
}

}  // namespace

Qwen3Args qwen3_args_from_hf_config(const nlohmann::json& config, const std::string& source) {
  TITAN_CHECK(config.is_object(), source, ": config.json must be a JSON object");
  HfConfigReader r(config, source);
  TITAN_CHECK(r.has("model_type"), source,
              ": key 'model_type' is missing (need qwen3 or qwen3_moe)");
  std::string model_type;
  r.read_string("model_type", model_type);
  TITAN_CHECK(model_type == "qwen3" || model_type == "qwen3_moe", source, ": model_type '",
              model_type, "' is not supported (need qwen3 or qwen3_moe)");

  // Class defaults of the installed Qwen3Config / Qwen3MoeConfig (transformers 5.17).
  Qwen3Args a;
  a.model_type = model_type;
  const bool moe = model_type == "qwen3_moe";
  a.hidden_size = moe ? 2048 : 4096;
  a.intermediate_size = moe ? 6144 : 22016;
  a.num_hidden_layers = moe ? 24 : 32;
  a.dtype = "float32";
  DecoderKeyDefaults defaults;
  // Qwen3Config: None -> num_attention_heads; Qwen3MoeConfig: 4.
  defaults.num_key_value_heads = [moe](const DecoderArgs& d) {
    return moe ? 4 : d.num_attention_heads;
  };
  // Qwen3Config declares head_dim = 128; Qwen3MoeConfig has no such field, so its modeling
  // code falls back to hidden_size // num_attention_heads when the key is absent.
  defaults.head_dim = [moe](const DecoderArgs& d) {
    return moe ? d.hidden_size / d.num_attention_heads : 128;
  };
  read_decoder_args(r, a, defaults, "Qwen3");
  read_rope(r, a);

  bool sliding = false;
  r.read_bool("use_sliding_window", sliding);
  TITAN_CHECK(!sliding, source, ": use_sliding_window=true is not supported");

  if (moe) {
    a.num_experts = 128;
    bool has_experts = false;
    if (r.has("num_experts")) {
      r.read_int("num_experts", a.num_experts);
      has_experts = true;
    }
    if (r.has("num_local_experts")) {
      int64_t local = 0;
      r.read_int("num_local_experts", local);
      TITAN_CHECK(!has_experts || local == a.num_experts, source, ": num_experts (", a.num_experts,
                  ") and num_local_experts (", local, ") disagree");
      a.num_experts = local;
    }
    a.num_experts_per_tok = 8;
    a.moe_intermediate_size = 768;
    r.read_int("num_experts_per_tok", a.num_experts_per_tok);
    r.read_int("moe_intermediate_size", a.moe_intermediate_size);
    r.read_bool("norm_topk_prob", a.norm_topk_prob);
    r.read_int("decoder_sparse_step", a.decoder_sparse_step);
    if (r.has("mlp_only_layers")) {
      const auto& v = r.at("mlp_only_layers");
      if (!v.is_array()) r.wrong_type("mlp_only_layers", "a list of integers", v);
      r.read_int_list("mlp_only_layers", a.mlp_only_layers);
    }
    r.read_double("router_aux_loss_coef", a.router_aux_loss_coef);
    r.read_bool("output_router_logits", a.output_router_logits);
  }
  a.validate(source);
  return a;
}

nlohmann::json qwen3_args_to_hf_config(const Qwen3Args& a, const std::string& dtype) {
  using nlohmann::json;
  const bool moe = a.is_moe();
  json c = json::object();
  c["architectures"] = json::array({moe ? "Qwen3MoeForCausalLM" : "Qwen3ForCausalLM"});
  c["model_type"] = moe ? "qwen3_moe" : "qwen3";
  json scaling = nullptr;  // v4 reads rope_theta/rope_scaling, v5 rope_parameters: both
  if (a.rope_type == "yarn") {
    scaling = {{"rope_type", a.rope_type},
               {"factor", a.rope_factor},
               {"original_max_position_embeddings", a.rope_original_max_position_embeddings},
               {"beta_fast", a.rope_beta_fast},
               {"beta_slow", a.rope_beta_slow},
               {"truncate", a.rope_truncate}};
    if (a.rope_attention_factor) scaling["attention_factor"] = *a.rope_attention_factor;
  }
  write_decoder_args(c, a, dtype, scaling);
  c["sliding_window"] = nullptr;
  c["use_sliding_window"] = false;
  if (moe) {
    c["decoder_sparse_step"] = a.decoder_sparse_step;
    c["mlp_only_layers"] = a.mlp_only_layers;
    c["moe_intermediate_size"] = a.moe_intermediate_size;
    c["norm_topk_prob"] = a.norm_topk_prob;
    c["num_experts"] = a.num_experts;  // v4 reads only this; v5 maps it to num_local_experts
    c["num_experts_per_tok"] = a.num_experts_per_tok;
    c["output_router_logits"] = a.output_router_logits;
    c["router_aux_loss_coef"] = static_cast<double>(a.router_aux_loss_coef);
  } else {
    c["layer_types"] = std::vector<std::string>(a.num_hidden_layers, "full_attention");
    c["max_window_layers"] = a.num_hidden_layers;
  }
  return c;
}

}  // namespace titan::models
