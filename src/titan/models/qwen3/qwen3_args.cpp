#include "titan/models/qwen3/qwen3_args.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "titan/common/error.h"
#include "titan/common/strings.h"

namespace titan::models {
namespace {

// Typed access to config.json keys: absent or null keys keep the default, a value of the wrong
// JSON type is an error naming the key and the file.
class ConfigReader {
 public:
  ConfigReader(const nlohmann::json& json, std::string source)
      : json_(json), source_(std::move(source)) {}

  bool has(const std::string& key) const { return json_.contains(key) && !json_.at(key).is_null(); }
  const nlohmann::json& at(const std::string& key) const { return json_.at(key); }

  void read_int(const std::string& key, int64_t& out) const {
    if (!has(key)) return;
    const auto& v = json_.at(key);
    if (!v.is_number_integer()) wrong_type(key, "an integer", v);
    out = v.get<int64_t>();
  }
  void read_double(const std::string& key, double& out) const {
    if (!has(key)) return;
    const auto& v = json_.at(key);
    if (!v.is_number()) wrong_type(key, "a number", v);
    out = v.get<double>();
  }
  void read_bool(const std::string& key, bool& out) const {
    if (!has(key)) return;
    const auto& v = json_.at(key);
    if (!v.is_boolean()) wrong_type(key, "true or false", v);
    out = v.get<bool>();
  }
  void read_string(const std::string& key, std::string& out) const {
    if (!has(key)) return;
    const auto& v = json_.at(key);
    if (!v.is_string()) wrong_type(key, "a string", v);
    out = v.get<std::string>();
  }
  void read_optional_int(const std::string& key, std::optional<int64_t>& out) const {
    if (!has(key)) return;
    int64_t value = 0;
    read_int(key, value);
    out = value;
  }
  // An int or a list of ints (eos_token_id may be either).
  void read_int_list(const std::string& key, std::vector<int64_t>& out) const {
    if (!has(key)) return;
    const auto& v = json_.at(key);
    out.clear();
    if (v.is_number_integer()) {
      out.push_back(v.get<int64_t>());
      return;
    }
    if (!v.is_array()) wrong_type(key, "an integer or a list of integers", v);
    for (const auto& item : v) {
      if (!item.is_number_integer()) wrong_type(key, "a list of integers", v);
      out.push_back(item.get<int64_t>());
    }
  }

  [[noreturn]] void wrong_type(const std::string& key, const char* expected,
                               const nlohmann::json& value) const {
    fail(source_, ": key '", key, "' must be ", expected, ", got ", value.dump());
  }

  const std::string& source() const { return source_; }

 private:
  const nlohmann::json& json_;
  std::string source_;
};

// Reads the RoPE settings the way PreTrainedConfig.convert_rope_params_to_dict does: a truthy
// legacy rope_scaling replaces rope_parameters; rope_theta comes from that dict, else the
// top-level key, else 10000.
void read_rope(const ConfigReader& reader, Qwen3Args& args) {
  nlohmann::json params = nlohmann::json::object();
  std::string params_key = "rope_parameters";
  if (reader.has("rope_scaling")) {
    const auto& scaling = reader.at("rope_scaling");
    if (!scaling.is_object()) reader.wrong_type("rope_scaling", "an object or null", scaling);
    if (!scaling.empty()) {
      params = scaling;
      params_key = "rope_scaling";
    }
  }
  if (params_key == "rope_parameters" && reader.has("rope_parameters")) {
    params = reader.at("rope_parameters");
    if (!params.is_object()) reader.wrong_type("rope_parameters", "an object or null", params);
  }
  args.rope_theta = 10000.0;
  reader.read_double("rope_theta", args.rope_theta);
  ConfigReader nested(params, reader.source() + " (" + params_key + ")");
  nested.read_double("rope_theta", args.rope_theta);
  args.rope_type = "default";
  nested.read_string("type", args.rope_type);
  nested.read_string("rope_type", args.rope_type);
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

Qwen3Args official(int64_t hidden, int64_t intermediate, int64_t layers, int64_t heads,
                   int64_t kv_heads, bool tie) {
  Qwen3Args a;
  a.model_type = "qwen3";
  a.vocab_size = 151936;
  a.hidden_size = hidden;
  a.intermediate_size = intermediate;
  a.num_hidden_layers = layers;
  a.num_attention_heads = heads;
  a.num_key_value_heads = kv_heads;
  a.head_dim = 128;
  a.rms_norm_eps = 1e-6;
  a.rope_theta = 1000000.0;
  a.max_position_embeddings = 40960;
  a.tie_word_embeddings = tie;
  a.bos_token_id = 151643;
  a.eos_token_id = {151645};
  a.dtype = "bfloat16";
  return a;
}

Qwen3Args official_moe(int64_t hidden, int64_t intermediate, int64_t layers, int64_t heads,
                       int64_t kv_heads, int64_t moe_intermediate) {
  Qwen3Args a = official(hidden, intermediate, layers, heads, kv_heads, false);
  a.model_type = "qwen3_moe";
  a.num_experts = 128;
  a.num_experts_per_tok = 8;
  a.moe_intermediate_size = moe_intermediate;
  a.norm_topk_prob = true;
  return a;
}

const std::map<std::string, Qwen3Args>& flavors() {
  static const std::map<std::string, Qwen3Args> table = [] {
    std::map<std::string, Qwen3Args> t;
    // Tiny but with the real vocabulary, so it trains on real tokenizer output in seconds.
    Qwen3Args debug = official(256, 768, 4, 8, 4, true);
    debug.head_dim = 64;
    t["debugmodel"] = debug;
    Qwen3Args debug_moe = debug;
    debug_moe.model_type = "qwen3_moe";
    debug_moe.num_experts = 8;
    debug_moe.num_experts_per_tok = 2;
    debug_moe.moe_intermediate_size = 256;
    debug_moe.norm_topk_prob = true;
    t["debugmodel_moe"] = debug_moe;
    t["0.6B"] = official(1024, 3072, 28, 16, 8, true);
    t["1.7B"] = official(2048, 6144, 28, 16, 8, true);
    t["4B"] = official(2560, 9728, 36, 32, 8, true);
    t["8B"] = official(4096, 12288, 36, 32, 8, false);
    t["14B"] = official(5120, 17408, 40, 40, 8, false);
    t["32B"] = official(5120, 25600, 64, 64, 8, false);
    t["30B-A3B"] = official_moe(2048, 6144, 48, 32, 4, 768);
    t["235B-A22B"] = official_moe(4096, 12288, 94, 64, 4, 1536);
    return t;
  }();
  return table;
}

std::string format_list(const std::vector<int64_t>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) out += (i ? "," : "") + std::to_string(values[i]);
  return out + "]";
}

std::string format_double(double v) {
  std::ostringstream s;
  s.precision(17);
  s << v;
  return s.str();
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

Qwen3Args qwen3_flavor(const std::string& name) {
  const auto& table = flavors();
  auto it = table.find(name);
  if (it == table.end()) {
    fail("unknown Qwen3 flavor '", name, "' (known: ", join(qwen3_flavor_names()), ", or auto)");
  }
  return it->second;
}

std::vector<std::string> qwen3_flavor_names() {
  // Listed from small to large, as a user reads them.
  return {"debugmodel", "debugmodel_moe", "0.6B",     "1.7B", "4B", "8B", "14B",
          "32B",        "30B-A3B",        "235B-A22B"};
}

Qwen3Args qwen3_args_from_hf_config(const nlohmann::json& config, const std::string& source) {
  TITAN_CHECK(config.is_object(), source, ": config.json must be a JSON object");
  ConfigReader r(config, source);
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
  a.vocab_size = 151936;
  a.hidden_size = moe ? 2048 : 4096;
  a.intermediate_size = moe ? 6144 : 22016;
  a.num_hidden_layers = moe ? 24 : 32;
  a.num_attention_heads = 32;
  a.max_position_embeddings = 32768;
  a.initializer_range = 0.02;
  a.rms_norm_eps = 1e-6;
  a.tie_word_embeddings = false;
  a.attention_bias = false;
  a.dtype = "float32";

  r.read_int("vocab_size", a.vocab_size);
  r.read_int("hidden_size", a.hidden_size);
  r.read_int("intermediate_size", a.intermediate_size);
  r.read_int("num_hidden_layers", a.num_hidden_layers);
  r.read_int("num_attention_heads", a.num_attention_heads);
  // Qwen3Config: None -> num_attention_heads; Qwen3MoeConfig: 4.
  a.num_key_value_heads = moe ? 4 : a.num_attention_heads;
  r.read_int("num_key_value_heads", a.num_key_value_heads);
  // Qwen3Config declares head_dim = 128; Qwen3MoeConfig has no such field, so its modeling
  // code falls back to hidden_size // num_attention_heads when the key is absent.
  a.head_dim = moe ? a.hidden_size / std::max<int64_t>(a.num_attention_heads, 1) : 128;
  r.read_int("head_dim", a.head_dim);
  r.read_double("rms_norm_eps", a.rms_norm_eps);
  r.read_int("max_position_embeddings", a.max_position_embeddings);
  r.read_bool("tie_word_embeddings", a.tie_word_embeddings);
  r.read_bool("attention_bias", a.attention_bias);
  r.read_double("initializer_range", a.initializer_range);
  r.read_optional_int("bos_token_id", a.bos_token_id);
  r.read_int_list("eos_token_id", a.eos_token_id);
  r.read_optional_int("pad_token_id", a.pad_token_id);
  r.read_string("torch_dtype", a.dtype);
  r.read_string("dtype", a.dtype);  // v5 key wins over the legacy one
  read_rope(r, a);

  std::string act = "silu";
  r.read_string("hidden_act", act);
  TITAN_CHECK(act == "silu", source, ": hidden_act '", act, "' is not supported (Qwen3 uses silu)");
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
  c["attention_bias"] = a.attention_bias;
  c["attention_dropout"] = 0.0;
  c["bos_token_id"] = a.bos_token_id ? json(*a.bos_token_id) : json(nullptr);
  if (a.eos_token_id.empty()) {
    c["eos_token_id"] = nullptr;
  } else if (a.eos_token_id.size() == 1) {
    c["eos_token_id"] = a.eos_token_id[0];
  } else {
    c["eos_token_id"] = a.eos_token_id;
  }
  c["pad_token_id"] = a.pad_token_id ? json(*a.pad_token_id) : json(nullptr);
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
  // v4 reads rope_theta/rope_scaling, v5 rope_parameters: write both.
  json rope = {{"rope_theta", a.rope_theta}, {"rope_type", a.rope_type}};
  c["rope_theta"] = a.rope_theta;
  if (a.rope_type == "yarn") {
    json scaling = {{"rope_type", a.rope_type},
                    {"factor", a.rope_factor},
                    {"original_max_position_embeddings", a.rope_original_max_position_embeddings},
                    {"beta_fast", a.rope_beta_fast},
                    {"beta_slow", a.rope_beta_slow},
                    {"truncate", a.rope_truncate}};
    if (a.rope_attention_factor) scaling["attention_factor"] = *a.rope_attention_factor;
    c["rope_scaling"] = scaling;
    rope.update(scaling);
  } else {
    c["rope_scaling"] = nullptr;
  }
  c["rope_parameters"] = rope;
  c["sliding_window"] = nullptr;
  c["use_sliding_window"] = false;
  c["tie_word_embeddings"] = a.tie_word_embeddings;
  c["dtype"] = dtype;
  c["torch_dtype"] = dtype;
  c["transformers_version"] = "5.17.0";
  c["use_cache"] = true;
  c["vocab_size"] = a.vocab_size;
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

void check_same_architecture(const Qwen3Args& f, const std::string& flavor_name, const Qwen3Args& c,
                             const std::string& file_path) {
  auto mismatch = [&](const char* field, const std::string& a, const std::string& b) {
    fail("model.flavor '", flavor_name, "' does not match ", file_path, ": ", field, " is ", a,
         " in the flavor but ", b, " in the file (use --model.flavor auto to take the file's)");
  };
  auto ints = [&](const char* field, int64_t a, int64_t b) {
    if (a != b) mismatch(field, std::to_string(a), std::to_string(b));
  };
  auto doubles = [&](const char* field, double a, double b) {
    if (a != b) mismatch(field, format_double(a), format_double(b));
  };
  auto bools = [&](const char* field, bool a, bool b) {
    if (a != b) mismatch(field, a ? "true" : "false", b ? "true" : "false");
  };
  if (f.model_type != c.model_type) mismatch("model_type", f.model_type, c.model_type);
  ints("vocab_size", f.vocab_size, c.vocab_size);
  ints("hidden_size", f.hidden_size, c.hidden_size);
  ints("num_hidden_layers", f.num_hidden_layers, c.num_hidden_layers);
  ints("num_attention_heads", f.num_attention_heads, c.num_attention_heads);
  ints("num_key_value_heads", f.num_key_value_heads, c.num_key_value_heads);
  ints("head_dim", f.head_dim, c.head_dim);
  doubles("rms_norm_eps", f.rms_norm_eps, c.rms_norm_eps);
  doubles("rope_theta", f.rope_theta, c.rope_theta);
  if (f.rope_type != c.rope_type) mismatch("rope_type", f.rope_type, c.rope_type);
  if (f.rope_type == "yarn") {
    doubles("rope factor", f.rope_factor, c.rope_factor);
    ints("original_max_position_embeddings", f.rope_original_max_position_embeddings,
         c.rope_original_max_position_embeddings);
  }
  bools("tie_word_embeddings", f.tie_word_embeddings, c.tie_word_embeddings);
  bools("attention_bias", f.attention_bias, c.attention_bias);
  bool any_dense = false;
  for (int64_t i = 0; i < f.num_hidden_layers; ++i) any_dense = any_dense || !f.is_sparse_layer(i);
  if (any_dense) ints("intermediate_size", f.intermediate_size, c.intermediate_size);
  ints("num_experts", f.num_experts, c.num_experts);
  if (f.is_moe()) {
    ints("num_experts_per_tok", f.num_experts_per_tok, c.num_experts_per_tok);
    ints("moe_intermediate_size", f.moe_intermediate_size, c.moe_intermediate_size);
    bools("norm_topk_prob", f.norm_topk_prob, c.norm_topk_prob);
    ints("decoder_sparse_step", f.decoder_sparse_step, c.decoder_sparse_step);
    if (f.mlp_only_layers != c.mlp_only_layers) {
      mismatch("mlp_only_layers", format_list(f.mlp_only_layers), format_list(c.mlp_only_layers));
    }
  }
}

Qwen3Args resolve_qwen3_args(const config::ModelConfig& model) {
  const std::filesystem::path path = std::filesystem::path(model.hf_assets_path) / "config.json";
  const bool present = !model.hf_assets_path.empty() && std::filesystem::exists(path);
  auto read_file = [&] {
    std::ifstream in(path);
    TITAN_CHECK(in, "cannot open ", path.string());
    nlohmann::json json;
    try {
      json = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      fail(path.string(), ": invalid JSON: ", e.what());
    }
    return qwen3_args_from_hf_config(json, path.string());
  };
  if (model.flavor == "auto") {
    TITAN_CHECK(present, "model.flavor auto needs ", path.string(),
                ", which does not exist (set model.hf_assets_path or a named flavor)");
    return read_file();
  }
  Qwen3Args args = qwen3_flavor(model.flavor);
  if (!present) return args;
  const Qwen3Args file = read_file();
  check_same_architecture(args, model.flavor, file, path.string());
  args.bos_token_id = file.bos_token_id;
  args.eos_token_id = file.eos_token_id;
  args.pad_token_id = file.pad_token_id;
  args.max_position_embeddings = file.max_position_embeddings;
  return args;
}

}  // namespace titan::models
