#include "titan/models/qwen3/model.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>

#include "titan/common/error.h"
#include "titan/models/common/activation_checkpoint.h"
#include "titan/models/common/attention.h"
#include "titan/models/common/moe.h"
#include "titan/models/common/rms_norm.h"
#include "titan/models/common/swiglu.h"

namespace titan::models {
namespace {

at::Tensor cast(const at::Tensor& t, at::ScalarType dtype) { return t.defined() ? t.to(dtype) : t; }

RopeSettings rope_settings(const Qwen3Args& a) {
  RopeSettings s;
  s.head_dim = a.head_dim;
  s.theta = a.rope_theta;
  s.yarn = a.rope_type == "yarn";
  s.factor = a.rope_factor;
  s.original_max_position_embeddings = a.rope_original_max_position_embeddings > 0
                                           ? a.rope_original_max_position_embeddings
                                           : a.max_position_embeddings;
  s.attention_factor = a.rope_attention_factor;
  s.beta_fast = a.rope_beta_fast;
  s.beta_slow = a.rope_beta_slow;
  s.truncate = a.rope_truncate;
  return s;
}

}  // namespace

MoeBalancing parse_moe_balancing(const std::string& name) {
  if (name == "none") return MoeBalancing::kNone;
  if (name == "aux_loss") return MoeBalancing::kAuxLoss;
  if (name == "expert_bias") return MoeBalancing::kExpertBias;
  fail("model.moe_load_balancing '", name, "' is not one of none, aux_loss, expert_bias");
}

Qwen3Model::Qwen3Model(const Qwen3Args& args, const Qwen3Options& options,
                       const BuildOptions& build)
    : args_(args), options_(options), compute_dtype_(build.compute_dtype) {
  args_.validate("Qwen3 model");
  const Qwen3Args& a = args_;
  const int64_t H = a.hidden_size, d = a.head_dim;
  const int64_t q_out = a.num_attention_heads * d, kv_out = a.num_key_value_heads * d;
  // Created as float32 on the CPU (so the seeded init is the same everywhere), then moved.
  auto make = [](std::vector<int64_t> shape) { return at::empty(shape, at::kFloat); };
  embed_tokens = make({a.vocab_size, H});
  layers_.resize(a.num_hidden_layers);
  for (int64_t i = 0; i < a.num_hidden_layers; ++i) {
    Layer& l = layers_[i];
    l.sparse = a.is_sparse_layer(i);
    l.q_proj = make({q_out, H});
    l.k_proj = make({kv_out, H});
    l.v_proj = make({kv_out, H});
    l.o_proj = make({H, q_out});
    if (a.attention_bias) {
      l.q_bias = make({q_out});
      l.k_bias = make({kv_out});
      l.v_bias = make({kv_out});
      l.o_bias = make({H});
    }
    l.q_norm = make({d});
    l.k_norm = make({d});
    if (l.sparse) {
      const int64_t E = a.num_experts, Im = a.moe_intermediate_size;
      l.experts_gate_up = make({E, 2 * Im, H});
      l.experts_down = make({E, H, Im});
      l.router = make({E, H});
      l.load = at::zeros({E}, at::kFloat);
      if (options_.balancing == MoeBalancing::kExpertBias)
        l.expert_bias = at::zeros({E}, at::kFloat);
    } else {
      l.gate_proj = make({a.intermediate_size, H});
      l.up_proj = make({a.intermediate_size, H});
      l.down_proj = make({H, a.intermediate_size});
    }
    l.input_norm = make({H});
    l.post_norm = make({H});
  }
  final_norm = make({H});
  if (!a.tie_word_embeddings) lm_head = make({a.vocab_size, H});
  if (build.init_weights) initialise(build.seed);
  rope_freqs_ = rope_frequencies(rope_settings(a));
  to(build.device, build.param_dtype);
}

void Qwen3Model::initialise(uint64_t seed) {
  // Hugging Face's _init_weights: normal(0, initializer_range) for every matrix (linears,
  // embedding, fused experts, router), zero biases, unit norms, zero padding row.
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const double std = args_.initializer_range;
  at::NoGradGuard no_grad;
  visit_parameters([&](const std::string& name, at::Tensor& t) {
    if (t.dim() >= 2) {
      t.normal_(0.0, std, gen);
    } else if (name.size() >= 5 && name.compare(name.size() - 5, 5, ".bias") == 0) {
      t.zero_();
    } else {
      t.fill_(1.0);
    }
  });
  if (args_.pad_token_id) embed_tokens[*args_.pad_token_id].zero_();
}

void Qwen3Model::visit_parameters(const std::function<void(const std::string&, at::Tensor&)>& f) {
  f("model.embed_tokens.weight", embed_tokens);
  for (size_t i = 0; i < layers_.size(); ++i) {
    Layer& l = layers_[i];
    const std::string p = "model.layers." + std::to_string(i) + ".";
    auto linear = [&](const std::string& name, at::Tensor& w, at::Tensor& b) {
      f(p + name + ".weight", w);
      if (b.defined()) f(p + name + ".bias", b);
    };
    linear("self_attn.q_proj", l.q_proj, l.q_bias);
    linear("self_attn.k_proj", l.k_proj, l.k_bias);
    linear("self_attn.v_proj", l.v_proj, l.v_bias);
    linear("self_attn.o_proj", l.o_proj, l.o_bias);
    f(p + "self_attn.q_norm.weight", l.q_norm);
    f(p + "self_attn.k_norm.weight", l.k_norm);
    if (l.sparse) {
      f(p + "mlp.experts.gate_up_proj", l.experts_gate_up);
      f(p + "mlp.experts.down_proj", l.experts_down);
      f(p + "mlp.gate.weight", l.router);
    } else {
      f(p + "mlp.gate_proj.weight", l.gate_proj);
      f(p + "mlp.up_proj.weight", l.up_proj);
      f(p + "mlp.down_proj.weight", l.down_proj);
    }
    f(p + "input_layernorm.weight", l.input_norm);
    f(p + "post_attention_layernorm.weight", l.post_norm);
  }
  f("model.norm.weight", final_norm);
  if (lm_head.defined()) f("lm_head.weight", lm_head);
}

void Qwen3Model::visit_buffers(const std::function<void(const std::string&, at::Tensor&)>& f) {
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (layers_[i].expert_bias.defined()) {
      f("model.layers." + std::to_string(i) + ".mlp.expert_bias", layers_[i].expert_bias);
    }
  }
}

NamedTensors Qwen3Model::named_parameters() {
  NamedTensors out;
  visit_parameters([&](const std::string& name, at::Tensor& t) { out.emplace_back(name, t); });
  return out;
}

NamedTensors Qwen3Model::named_buffers() {
  NamedTensors out;
  visit_buffers([&](const std::string& name, at::Tensor& t) { out.emplace_back(name, t); });
  return out;
}

NamedTensors Qwen3Model::moe_load_counts() {
  NamedTensors out;
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (layers_[i].expert_bias.defined()) {
      out.emplace_back("model.layers." + std::to_string(i) + ".mlp.tokens_per_expert",
                       layers_[i].load);
    }
  }
  return out;
}

void Qwen3Model::to(at::Device device, at::ScalarType param_dtype) {
  visit_parameters([&](const std::string&, at::Tensor& t) {
    t = t.detach().to(device, param_dtype).requires_grad_(true);
  });
  for (Layer& l : layers_) {
    if (l.load.defined()) l.load = l.load.to(device);
    if (l.expert_bias.defined()) l.expert_bias = l.expert_bias.to(device);
  }
  rope_cache_.clear();
}

nlohmann::json Qwen3Model::hf_config(const std::string& dtype) const {
  return qwen3_args_to_hf_config(args_, dtype);
}

at::Tensor Qwen3Model::output_weight() { return lm_head.defined() ? lm_head : embed_tokens; }

const RopeTables& Qwen3Model::rope_for(int64_t seq_len, at::Device device) {
  const auto key =
      std::make_tuple(seq_len, static_cast<int>(device.type()), static_cast<int>(device.index()),
                      static_cast<int>(compute_dtype_));
  auto it = rope_cache_.find(key);
  if (it == rope_cache_.end()) {
    at::NoGradGuard no_grad;
    if (rope_cache_.size() > 8) rope_cache_.clear();  // a few sequence lengths at most
    it = rope_cache_.emplace(key, rope_tables(rope_freqs_, seq_len, compute_dtype_, device)).first;
  }
  return it->second;
}

at::Tensor Qwen3Model::attention(const Layer& l, const at::Tensor& x, const RopeTables& rope,
                                 KVCache* cache, size_t layer_index) {
  const auto dt = compute_dtype_;
  const int64_t B = x.size(0), S = x.size(1), d = args_.head_dim;
  const double eps = args_.rms_norm_eps;
  auto project = [&](const at::Tensor& w, const at::Tensor& b) {
    return at::linear(x, w.to(dt), cast(b, dt)).view({B, S, -1, d});
  };
  const at::Tensor q =
      apply_rope(rms_norm(project(l.q_proj, l.q_bias), l.q_norm, eps).transpose(1, 2), rope);
  at::Tensor k =
      apply_rope(rms_norm(project(l.k_proj, l.k_bias), l.k_norm, eps).transpose(1, 2), rope);
  at::Tensor v = project(l.v_proj, l.v_bias).transpose(1, 2);
  int64_t past = 0;
  if (cache != nullptr) {
    past = cache->length;
    if (cache->keys.size() <= layer_index) {
      cache->keys.resize(layer_index + 1);
      cache->values.resize(layer_index + 1);
    }
    if (past > 0) {
      k = at::cat({cache->keys[layer_index], k}, 2);
      v = at::cat({cache->values[layer_index], v}, 2);
    }
    cache->keys[layer_index] = k;
    cache->values[layer_index] = v;
  }
  const at::Tensor o = causal_attention(q, k, v, past).transpose(1, 2).reshape({B, S, -1});
  return at::linear(o, l.o_proj.to(dt), cast(l.o_bias, dt));
}

at::Tensor Qwen3Model::feed_forward(Layer& l, const at::Tensor& x,
                                    std::vector<at::Tensor>& router_logits) {
  if (!l.sparse) return swiglu_mlp(x, l.gate_proj, l.up_proj, l.down_proj);
  const at::Tensor flat = x.reshape({-1, x.size(-1)});
  const Routing routing =
      route_tokens(flat, l.router, args_.num_experts_per_tok, args_.norm_topk_prob, l.expert_bias);
  if (options_.balancing == MoeBalancing::kAuxLoss) router_logits.push_back(routing.logits);
  if (l.expert_bias.defined() && at::GradMode::is_enabled()) {
    at::NoGradGuard no_grad;
    l.load.add_(expert_load(routing.top_experts, args_.num_experts));
  }
  return grouped_experts(flat, routing, l.experts_gate_up, l.experts_down).view(x.sizes());
}

at::Tensor Qwen3Model::hidden_states(const at::Tensor& input_ids, KVCache* cache) {
  TITAN_CHECK(input_ids.dim() == 2, "input ids must be [batch, seq], got ", input_ids.sizes());
  const at::Tensor ids = input_ids.to(embed_tokens.device(), at::kLong);
  const int64_t past = cache != nullptr ? cache->length : 0;
  RopeTables rope = rope_for(past + ids.size(1), embed_tokens.device());
  if (past > 0) rope = {rope.cos.slice(0, past), rope.sin.slice(0, past)};
  // Gather in the parameter dtype, then cast: the same values as casting the whole table.
  at::Tensor h =
      at::embedding(embed_tokens, ids, args_.pad_token_id.value_or(-1)).to(compute_dtype_);
  std::vector<at::Tensor> router_logits;
  const double eps = args_.rms_norm_eps;
  const bool aux_loss = options_.balancing == MoeBalancing::kAuxLoss;
  for (size_t i = 0; i < layers_.size(); ++i) {
    Layer& l = layers_[i];
    // A recomputed layer must not feed the aux loss (its router logits would carry no graph).
    const bool recompute = checkpoint_every_ > 0 && i % checkpoint_every_ == 0 &&
                           cache == nullptr && at::GradMode::is_enabled() &&
                           !(l.sparse && aux_loss);
    if (recompute) {
      h = checkpointed(
          [this, &l, rope, eps](const at::Tensor& x) {
            std::vector<at::Tensor> unused;
            const at::Tensor y = x + attention(l, rms_norm(x, l.input_norm, eps), rope, nullptr, 0);
            return y + feed_forward(l, rms_norm(y, l.post_norm, eps), unused);
          },
          h);
      continue;
    }
    h = h + attention(l, rms_norm(h, l.input_norm, eps), rope, cache, i);
    h = h + feed_forward(l, rms_norm(h, l.post_norm, eps), router_logits);
  }
  extra_loss_ = at::Tensor();
  if (!router_logits.empty()) {
    extra_loss_ = options_.router_aux_loss_coef *
                  load_balancing_loss(router_logits, args_.num_experts, args_.num_experts_per_tok);
  }
  return rms_norm(h, final_norm, eps);
}

at::Tensor Qwen3Model::final_hidden(const at::Tensor& input_ids) {
  return hidden_states(input_ids, nullptr);
}

at::Tensor Qwen3Model::forward_cached(const at::Tensor& input_ids, KVCache& cache) {
  at::NoGradGuard no_grad;
  const at::Tensor h = hidden_states(input_ids, &cache);
  cache.length += input_ids.size(1);
  return at::linear(h, output_weight().to(compute_dtype_));
}

at::Tensor Qwen3Model::forward(const at::Tensor& input_ids) {
  return at::linear(final_hidden(input_ids), output_weight().to(compute_dtype_));
}

void Qwen3Model::set_activation_checkpointing(const std::string& mode) {
  if (mode == "none") {
    checkpoint_every_ = 0;
  } else if (mode == "selective") {
    checkpoint_every_ = 2;
  } else if (mode == "full") {
    checkpoint_every_ = 1;
  } else {
    fail("activation_checkpoint.mode '", mode, "' is not one of none, selective, full");
  }
}

void Qwen3Model::after_optimizer_step() {
  for (Layer& l : layers_) {
    if (!l.expert_bias.defined()) continue;
    update_expert_bias(l.expert_bias, l.load, options_.expert_bias_update_rate);
    l.load.zero_();
  }
}

}  // namespace titan::models
