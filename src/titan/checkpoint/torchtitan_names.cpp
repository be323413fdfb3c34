#include "titan/checkpoint/torchtitan_names.h"

#include <array>
#include <map>

#include "titan/common/error.h"

namespace titan::checkpoint {
namespace {

constexpr const char* kLayers = "model.layers.";
constexpr const char* kExperts = "moe.routed_experts.inner_experts.";
constexpr const char* kQkv = "attention.qkv_linear.";

// A layer's tensors: titan's name after "model.layers.L." -> torchtitan's after "layers.L.".
const std::map<std::string, std::vector<std::string>>& layer_table() {
  static const std::map<std::string, std::vector<std::string>> table = {
      {"self_attn.q_proj.weight", {"attention.qkv_linear.wq.weight"}},
      {"self_attn.k_proj.weight", {"attention.qkv_linear.wk.weight"}},
      {"self_attn.v_proj.weight", {"attention.qkv_linear.wv.weight"}},
      {"self_attn.o_proj.weight", {"attention.wo.weight"}},
      {"self_attn.q_norm.weight", {"attention.q_norm.weight"}},
      {"self_attn.k_norm.weight", {"attention.k_norm.weight"}},
      {"input_layernorm.weight", {"attention_norm.weight"}},
      {"post_attention_layernorm.weight", {"ffn_norm.weight"}},
      {"mlp.gate_proj.weight", {"feed_forward.w1.weight"}},
      {"mlp.up_proj.weight", {"feed_forward.w3.weight"}},
      {"mlp.down_proj.weight", {"feed_forward.w2.weight"}},
      {"mlp.gate.weight", {"moe.router.gate.weight"}},
      {"mlp.experts.gate_up_proj",
       {std::string(kExperts) + "w1_EFD", std::string(kExperts) + "w3_EFD"}},
      {"mlp.experts.down_proj", {std::string(kExperts) + "w2_EDF"}},
      {"mlp.expert_bias", {"moe.expert_bias_E"}},
  };
  return table;
}

const std::map<std::string, std::string>& global_table() {
  static const std::map<std::string, std::string> table = {
      {"model.embed_tokens.weight", "tok_embeddings.weight"},
      {"model.norm.weight", "norm.weight"},
      {"lm_head.weight", "lm_head.weight"}};
  return table;
}

// "model.layers.12.self_attn.q_proj.weight" -> {"12", "self_attn.q_proj.weight"}
std::optional<std::pair<std::string, std::string>> split_layer(const std::string& name) {
  if (name.rfind(kLayers, 0) != 0) return std::nullopt;
  const size_t start = std::string(kLayers).size();
  const size_t dot = name.find('.', start);
  if (dot == std::string::npos || dot == start) return std::nullopt;
  return std::pair(name.substr(start, dot - start), name.substr(dot + 1));
}

int qkv_part_of(const std::string& rest) {
  if (rest == "self_attn.q_proj.weight") return 0;
  if (rest == "self_attn.k_proj.weight") return 1;
  if (rest == "self_attn.v_proj.weight") return 2;
  return -1;
}

// torchtitan's Llama3StateDictAdapter: _permute (its rows -> Hugging Face's) and
// _reverse_permute (back), over `n` heads of a [n * head_dim, dim] weight (or moment).
at::Tensor permute_rows(const at::Tensor& w, int64_t n, bool to_hf) {
  const int64_t rows = w.size(0), cols = w.numel() / std::max<int64_t>(rows, 1);
  TITAN_CHECK(n > 0 && rows % (2 * n) == 0, "cannot re-pair the rotary rows of a tensor of ", rows,
              " rows over ", n, " heads");
  const at::Tensor flat = w.reshape({rows, cols}).contiguous();
  const at::Tensor out = to_hf ? flat.view({n, rows / n / 2, 2, cols}).transpose(1, 2)
                               : flat.view({n, 2, rows / n / 2, cols}).transpose(1, 2);
  return out.reshape(w.sizes()).contiguous();
}

}  // namespace

TorchtitanModel TorchtitanModel::from_hf_config(const nlohmann::json& hf_config) {
  TorchtitanModel m;
  const std::string type = hf_config.value("model_type", "");
  m.llama = type == "llama";
  m.n_heads = hf_config.value("num_attention_heads", int64_t{0});
  m.n_kv_heads = hf_config.value("num_key_value_heads", m.n_heads);
  const int64_t hidden = hf_config.value("hidden_size", int64_t{0});
  m.head_dim = hf_config.contains("head_dim") && hf_config["head_dim"].is_number_integer()
                   ? hf_config["head_dim"].get<int64_t>()
                   : (m.n_heads > 0 ? hidden / m.n_heads : 0);
  TITAN_CHECK(m.n_heads > 0 && m.n_kv_heads > 0 && m.head_dim > 0 && m.n_heads % m.n_kv_heads == 0,
              "the model's config has no usable num_attention_heads / num_key_value_heads / "
              "head_dim for torchtitan's layout");
  return m;
}

std::optional<TorchtitanSource> torchtitan_model_source(const std::string& titan_name,
                                                        const TorchtitanModel& model) {
  if (auto g = global_table().find(titan_name); g != global_table().end())
    return TorchtitanSource{{g->second}};
  const auto layer = split_layer(titan_name);
  if (!layer) return std::nullopt;
  auto row = layer_table().find(layer->second);
  if (row == layer_table().end()) return std::nullopt;
  TorchtitanSource s;
  for (const std::string& n : row->second) s.names.push_back("layers." + layer->first + "." + n);
  if (row->second.size() > 1) s.join_dim = 1;  // w1_EFD and w3_EFD: [E, F, D] each
  const int part = qkv_part_of(layer->second);
  if (model.llama && part == 0) s.permute_heads = model.n_heads;
  if (model.llama && part == 1) s.permute_heads = model.n_kv_heads;
  return s;
}

std::optional<TorchtitanSource> torchtitan_param_source(const std::string& titan_name,
                                                        const TorchtitanModel& model,
                                                        bool fused_qkv) {
  std::optional<TorchtitanSource> s = torchtitan_model_source(titan_name, model);
  if (!s || !fused_qkv) return s;
  const auto layer = split_layer(titan_name);
  const int part = layer ? qkv_part_of(layer->second) : -1;
  if (part < 0) return s;
  s->names = {"layers." + layer->first + "." + kQkv + "wqkv.weight"};
  s->qkv_part = part;
  return s;
}

at::Tensor from_torchtitan(const TorchtitanSource& source, const std::vector<at::Tensor>& parts,
                           const TorchtitanModel& model) {
  TITAN_CHECK(parts.size() == source.names.size(), "internal: ", parts.size(), " tensors for ",
              source.names.size(), " names");
  at::Tensor t = parts.size() == 1 ? parts[0] : at::cat(parts, source.join_dim);
  if (source.qkv_part >= 0) {
    // [n_kv * (heads_per_kv + 2) * head_dim, dim]: per kv head its q heads, then k, then v.
    const int64_t hpk = model.n_heads / model.n_kv_heads, hd = model.head_dim;
    const int64_t rows = model.n_kv_heads * (hpk + 2) * hd;
    TITAN_CHECK(t.dim() == 2 && t.size(0) == rows, source.names[0], " has shape ", t.sizes(),
                ", not the ", rows, " rows of ", model.n_kv_heads, " kv heads of (", hpk,
                " + 2) x ", hd);
    const at::Tensor w = t.reshape({model.n_kv_heads, hpk + 2, hd, t.size(1)});
    if (source.qkv_part == 0) {
      t = w.slice(1, 0, hpk).reshape({-1, t.size(1)});
    } else {
      t = w.select(1, hpk + source.qkv_part - 1).reshape({-1, t.size(1)});
    }
    t = t.contiguous();
  }
  if (source.permute_heads > 0) t = permute_rows(t, source.permute_heads, /*to_hf=*/true);
  return t;
}

NamedTensors to_torchtitan_model(const NamedTensors& titan, const TorchtitanModel& model,
                                 bool tied) {
  NamedTensors out;
  for (const auto& [name, t] : titan) {
    const std::optional<TorchtitanSource> s = torchtitan_model_source(name, model);
    TITAN_CHECK(s, "tensor ", name, " has no counterpart in torchtitan's decoders");
    at::Tensor value = t;
    if (s->permute_heads > 0) value = permute_rows(value, s->permute_heads, /*to_hf=*/false);
    if (s->names.size() == 1) {
      out.emplace_back(s->names[0], value);
    } else {
      const int64_t half = value.size(s->join_dim) / 2;
      out.emplace_back(s->names[0], value.narrow(s->join_dim, 0, half).contiguous());
      out.emplace_back(s->names[1], value.narrow(s->join_dim, half, half).contiguous());
    }
    if (tied && name == "model.embed_tokens.weight") out.emplace_back("lm_head.weight", value);
  }
  return out;
}

NamedTensors to_torchtitan_params(const NamedTensors& titan, const TorchtitanModel& model) {
  // q, k and v of a layer are fused: gathered first, written where q was.
  std::map<std::string, std::array<at::Tensor, 3>> qkv;
  for (const auto& [name, t] : titan) {
    const auto layer = split_layer(name);
    const int part = layer ? qkv_part_of(layer->second) : -1;
    if (part >= 0) qkv[layer->first][part] = t;
  }
  NamedTensors out;
  for (const auto& [name, t] : titan) {
    const auto layer = split_layer(name);
    const int part = layer ? qkv_part_of(layer->second) : -1;
    if (part < 0) {
      for (auto& entry : to_torchtitan_model({{name, t}}, model, false)) out.push_back(entry);
      continue;
    }
    if (part != 0) continue;
    const auto& [q, k, v] = qkv[layer->first];
    TITAN_CHECK(q.defined() && k.defined() && v.defined(), "layer ", layer->first,
                " lacks one of q_proj, k_proj, v_proj");
    const int64_t hpk = model.n_heads / model.n_kv_heads, hd = model.head_dim;
    const at::Tensor tq = model.llama ? permute_rows(q, model.n_heads, false) : q;
    const at::Tensor tk = model.llama ? permute_rows(k, model.n_kv_heads, false) : k;
    const int64_t dim = q.size(1);
    const at::Tensor fused = at::cat({tq.reshape({model.n_kv_heads, hpk, hd, dim}),
                                      tk.reshape({model.n_kv_heads, 1, hd, dim}),
                                      v.reshape({model.n_kv_heads, 1, hd, dim})},
                                     1)
                                 .reshape({-1, dim});
    out.emplace_back("layers." + layer->first + "." + kQkv + "wqkv.weight", fused);
  }
  return out;
}

std::vector<std::string> torchtitan_param_names(const std::string& titan_name,
                                                const TorchtitanModel& model) {
  const std::optional<TorchtitanSource> s = torchtitan_param_source(titan_name, model, true);
  TITAN_CHECK(s, "tensor ", titan_name, " has no counterpart in torchtitan's decoders");
  return s->names;
}

bool is_torchtitan_buffer(const std::string& torchtitan_name) {
  return torchtitan_name.ends_with(".expert_bias_E");
}

}  // namespace titan::checkpoint
