#include "titan/models/qwen3/block.h"

#include <ATen/core/grad_mode.h>

#include <cmath>

#include "titan/kernels/linear.h"
#include "titan/kernels/override_resolver.h"
#include "titan/models/common/activation_checkpoint.h"
#include "titan/models/common/moe.h"

namespace titan::models {
namespace {

using kernels::Op;

at::Tensor cast(const at::Tensor& t, at::ScalarType dtype) { return t.defined() ? t.to(dtype) : t; }

}  // namespace

Qwen3Block::Qwen3Block(const Qwen3Args& a, int64_t index, bool with_expert_bias,
                       const at::TensorOptions& options, const at::TensorOptions& buffer_options,
                       kernels::OverrideResolver& overrides)
    : Module("layers." + std::to_string(index)),
      prefix_("model.layers." + std::to_string(index) + "."),
      sparse_(a.is_sparse_layer(index)),
      head_dim_(a.head_dim),
      top_k_(a.num_experts_per_tok),
      num_experts_(a.num_experts),
      norm_topk_prob_(a.norm_topk_prob),
      eps_(a.rms_norm_eps) {
  const int64_t H = a.hidden_size, d = a.head_dim;
  const int64_t q_out = a.num_attention_heads * d, kv_out = a.num_key_value_heads * d;
  auto make = [&](std::vector<int64_t> shape) { return at::empty(shape, options); };
  q_proj_.weight = make({q_out, H});
  k_proj_.weight = make({kv_out, H});
  v_proj_.weight = make({kv_out, H});
  o_proj_.weight = make({H, q_out});
  if (a.attention_bias) {
    q_proj_.bias = make({q_out});
    k_proj_.bias = make({kv_out});
    v_proj_.bias = make({kv_out});
    o_proj_.bias = make({H});
  }
  q_norm_ = make({d});
  k_norm_ = make({d});
  if (sparse_) {
    const int64_t E = a.num_experts, Im = a.moe_intermediate_size;
    experts_gate_up_ = make({E, 2 * Im, H});
    experts_down_ = make({E, H, Im});
    router_ = make({E, H});
    if (with_expert_bias) {
      const auto fp32 = buffer_options.dtype(at::kFloat);
      expert_bias_ = at::zeros({E}, fp32);
      tokens_per_expert_ = at::zeros({E}, fp32);
    }
  } else {
    gate_proj_.weight = make({a.intermediate_size, H});
    up_proj_.weight = make({a.intermediate_size, H});
    down_proj_.weight = make({H, a.intermediate_size});
  }
  input_norm_ = make({H});
  post_norm_ = make({H});

  const std::string& p = path();
  kernels_.attention_norm = overrides.function<Op::kRmsNorm>(p + ".attention_norm");
  kernels_.q_norm = overrides.function<Op::kRmsNorm>(p + ".attention.q_norm");
  kernels_.k_norm = overrides.function<Op::kRmsNorm>(p + ".attention.k_norm");
  kernels_.rope = overrides.function<Op::kRope>(p + ".attention");
  kernels_.attention = overrides.function<Op::kAttention>(p + ".attention");
  kernels_.ffn_norm = overrides.function<Op::kRmsNorm>(p + ".ffn_norm");
  if (sparse_) {
    kernels_.router = overrides.function<Op::kMoeRouter>(p + ".moe");
    kernels_.experts = overrides.function<Op::kMoeExperts>(p + ".moe");
    kernels_.dispatch = overrides.function<Op::kMoeDispatch>(p + ".moe");
    kernels_.combine = overrides.function<Op::kMoeCombine>(p + ".moe");
  } else {
    kernels_.feed_forward = overrides.function<Op::kSwiglu>(p + ".feed_forward");
  }
  // QLoRA's frozen projections (quantize_frozen_projections) read their NF4 weights here.
  for (const char* name : {"q_proj", "k_proj", "v_proj", "o_proj"})
    linear_named("self_attn." + std::string(name))->nf4_linear =
        overrides.function<Op::kNf4Linear>(p + ".attention." + name);
  if (!sparse_) {
    for (const char* name : {"gate_proj", "up_proj", "down_proj"})
      linear_named("mlp." + std::string(name))->nf4_linear =
          overrides.function<Op::kNf4Linear>(p + ".feed_forward." + name);
  }
}

std::vector<std::pair<std::string, Linear*>> Qwen3Block::projections() {
  std::vector<std::pair<std::string, Linear*>> out = {{"self_attn.q_proj", &q_proj_},
                                                      {"self_attn.k_proj", &k_proj_},
                                                      {"self_attn.v_proj", &v_proj_},
                                                      {"self_attn.o_proj", &o_proj_}};
  if (!sparse_) {
    out.emplace_back("mlp.gate_proj", &gate_proj_);
    out.emplace_back("mlp.up_proj", &up_proj_);
    out.emplace_back("mlp.down_proj", &down_proj_);
  }
  return out;
}

std::vector<std::pair<std::string, const Linear*>> Qwen3Block::projections() const {
  std::vector<std::pair<std::string, const Linear*>> out;
  for (const auto& [name, linear] : const_cast<Qwen3Block*>(this)->projections())
    out.emplace_back(name, linear);
  return out;
}

Linear* Qwen3Block::linear_named(const std::string& name) {
  for (const auto& [n, linear] : projections())
    if (n == name) return linear;
  return nullptr;
}

void Qwen3Block::visit_parameters(const ParameterVisitor& f) {
  const std::string& p = prefix_;
  auto adapter = [&](const std::string& weight_name, at::Tensor& a, at::Tensor& b) {
    f(lora_a_name(weight_name), a);
    f(lora_b_name(weight_name), b);
  };
  auto linear = [&](const std::string& name, Linear& l) {
    const std::string weight = p + name + ".weight";
    if (l.weight.defined()) f(weight, l.weight);  // not once it is held in NF4
    if (l.bias.defined()) f(p + name + ".bias", l.bias);
    if (l.adapter) adapter(weight, l.adapter->a, l.adapter->b);
  };
  linear("self_attn.q_proj", q_proj_);
  linear("self_attn.k_proj", k_proj_);
  linear("self_attn.v_proj", v_proj_);
  linear("self_attn.o_proj", o_proj_);
  f(p + "self_attn.q_norm.weight", q_norm_);
  f(p + "self_attn.k_norm.weight", k_norm_);
  if (sparse_) {
    f(p + "mlp.experts.gate_up_proj", experts_gate_up_);
    if (gate_up_adapter_)
      adapter(p + "mlp.experts.gate_up_proj", gate_up_adapter_->a, gate_up_adapter_->b);
    f(p + "mlp.experts.down_proj", experts_down_);
    if (down_adapter_) adapter(p + "mlp.experts.down_proj", down_adapter_->a, down_adapter_->b);
    f(p + "mlp.gate.weight", router_);
  } else {
    linear("mlp.gate_proj", gate_proj_);
    linear("mlp.up_proj", up_proj_);
    linear("mlp.down_proj", down_proj_);
  }
  f(p + "input_layernorm.weight", input_norm_);
  f(p + "post_attention_layernorm.weight", post_norm_);
}

std::vector<Qwen3Block::AdaptableWeight> Qwen3Block::adaptable_weights() const {
  std::vector<AdaptableWeight> out;
  for (const auto& [name, linear] : projections())
    out.push_back({prefix_ + name + ".weight", prefix_ + name, false});
  if (sparse_) {
    for (const char* name : {"mlp.experts.gate_up_proj", "mlp.experts.down_proj"})
      out.push_back({prefix_ + name, prefix_ + name, true});
  }
  return out;
}

void Qwen3Block::add_adapter(const std::string& weight_name, const LoraOptions& lora,
                             const at::TensorOptions& options) {
  const int64_t r = lora.rank;
  for (const auto& [name, linear] : projections()) {
    if (prefix_ + name + ".weight" != weight_name) continue;
    TITAN_CHECK(!linear->adapter, weight_name, " already has a LoRA adapter");
    LinearAdapter a;
    a.a = at::empty({r, linear->in_features()}, options);
    a.b = at::empty({linear->out_features(), r}, options);
    a.scale = lora.scale();
    a.dropout = lora.dropout;
    linear->adapter = std::move(a);
    return;
  }
  auto experts = [&](const at::Tensor& w, std::optional<ExpertsAdapter>& slot) {
    TITAN_CHECK(!slot, weight_name, " already has a LoRA adapter");
    ExpertsAdapter a;
    a.a = at::empty({w.size(0), r, w.size(2)}, options);
    a.b = at::empty({w.size(0), w.size(1), r}, options);
    a.scale = lora.scale();
    slot = std::move(a);
  };
  if (sparse_ && weight_name == prefix_ + "mlp.experts.gate_up_proj") {
    experts(experts_gate_up_, gate_up_adapter_);
  } else if (sparse_ && weight_name == prefix_ + "mlp.experts.down_proj") {
    experts(experts_down_, down_adapter_);
  } else {
    TITAN_CHECK(false, weight_name, " is not a weight LoRA can adapt");
  }
}

int64_t Qwen3Block::quantize_frozen_projections(bool double_quantization) {
  int64_t bytes = 0;
  at::NoGradGuard no_grad;
  for (const auto& [name, linear] : projections()) {
    if (linear->nf4) {
      bytes += linear->nf4->bytes();
      continue;
    }
    if (linear->weight.requires_grad()) continue;
    linear->nf4 = quantize_base(linear->weight, double_quantization);
    linear->weight = at::Tensor();
    bytes += linear->nf4->bytes();
  }
  return bytes;
}

Linear* Qwen3Block::projection_weighted(const std::string& weight_name) {
  for (const auto& [name, linear] : projections())
    if (prefix_ + name + ".weight" == weight_name) return linear;
  return nullptr;
}

std::vector<std::pair<std::string, std::vector<int64_t>>> Qwen3Block::nf4_weights() const {
  std::vector<std::pair<std::string, std::vector<int64_t>>> out;
  for (const auto& [name, linear] : projections())
    if (linear->nf4)
      out.push_back({prefix_ + name + ".weight", {linear->out_features(), linear->in_features()}});
  return out;
}

void Qwen3Block::visit_buffers(const ParameterVisitor& f) {
  if (expert_bias_.defined()) f(prefix_ + "mlp.expert_bias", expert_bias_);
}

Qwen3BlockOutput Qwen3Block::forward(const at::Tensor& h, const RopeTables& rope,
                                     const at::Tensor& document_ids) {
  const Tensors out = run_wrapped({h}, [this, rope, document_ids](const Tensors& in) {
    return compute(in[0], rope, document_ids, nullptr, nullptr);
  });
  Qwen3BlockOutput result;
  result.hidden = out[0];
  if (sparse_) {
    result.router_logits = out[1];
    result.expert_counts = out[2];
  }
  return result;
}

at::Tensor Qwen3Block::forward_cached(const at::Tensor& h, const RopeTables& rope, at::Tensor& keys,
                                      at::Tensor& values) {
  TITAN_CHECK(!tp_.active() && experts_group_.size == 1,
              "decoding with a KV cache runs on one process (no tensor or expert parallelism)");
  at::NoGradGuard no_grad;
  return compute(h, rope, /*document_ids=*/{}, &keys, &values)[0];
}

at::Tensor Qwen3Block::norm(kernels::RmsNormFn fn, const at::Tensor& x,
                            const at::Tensor& weight) const {
  const double eps = eps_;
  // A cheap op: recomputed in backward under op-level selective checkpointing.
  return recompute_if_selective(
      [fn, weight, eps](const Tensors& in) { return Tensors{fn(in[0], weight, eps)}; }, {x},
      {weight})[0];
}

at::Tensor Qwen3Block::attention(const at::Tensor& normed, const RopeTables& rope,
                                 const at::Tensor& document_ids, at::Tensor* keys,
                                 at::Tensor* values) const {
  // Tensor parallelism: the column-parallel projections see every token (their local heads).
  const at::Tensor x = tp_.active() ? tp_.enter(normed) : normed;
  const auto dt = x.scalar_type();
  const int64_t B = x.size(0), S = x.size(1), d = head_dim_;
  auto project = [&](const Linear& l) {
    const at::Tensor y =
        l.plain() ? kernels::linear(x, l.weight.to(dt), cast(l.bias, dt)) : l.forward(x);
    return y.view({B, S, -1, d});
  };
  const at::Tensor q_normed = norm(kernels_.q_norm, project(q_proj_), q_norm_);
  const at::Tensor k_normed = norm(kernels_.k_norm, project(k_proj_), k_norm_);
  const kernels::RopeFn rope_fn = kernels_.rope;
  const at::Tensor cos = rope.cos, sin = rope.sin;
  const Tensors rotated = recompute_if_selective(
      [rope_fn, cos, sin](const Tensors& in) {
        kernels::RotatedQueryKey r = rope_fn(in[0], in[1], cos, sin);
        return Tensors{r.q, r.k};
      },
      {q_normed.transpose(1, 2), k_normed.transpose(1, 2)}, {});
  const at::Tensor& q = rotated[0];
  at::Tensor k = rotated[1];
  at::Tensor v = project(v_proj_).transpose(1, 2);
  int64_t past = 0;
  if (keys != nullptr) {
    if (keys->defined()) {
      past = keys->size(2);
      k = at::cat({*keys, k}, 2);
      v = at::cat({*values, v}, 2);
    }
    *keys = k;
    *values = v;
  }
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  const at::Tensor o =
      kernels_.attention(q, k, v, scale, past, document_ids).transpose(1, 2).reshape({B, S, -1});
  if (!tp_.active()) {
    if (o_proj_.plain()) return kernels::linear(o, o_proj_.weight.to(dt), cast(o_proj_.bias, dt));
    return o_proj_.forward(o);
  }
  // Row-parallel: this rank's heads' share (and its adapter's, whose A holds this rank's
  // columns), summed over tp before the bias.
  const at::Tensor out = tp_.exit(o_proj_.project(o));
  return o_proj_.bias.defined() ? out + o_proj_.bias.to(dt) : out;
}

at::Tensor Qwen3Block::feed_forward(const at::Tensor& x) const {
  if (gate_proj_.plain() && up_proj_.plain() && down_proj_.plain())
    return kernels_.feed_forward(x, gate_proj_.weight, up_proj_.weight, down_proj_.weight);
  return down_proj_.project(at::silu(gate_proj_.project(x)) * up_proj_.project(x));
}

at::Tensor Qwen3Block::routed_experts(const at::Tensor& x, const kernels::Routing& routing) const {
  // Adapted expert stacks: the experts read W + B A (in the activations' dtype).
  const auto dt = x.scalar_type();
  const at::Tensor gate_up = gate_up_adapter_
                                 ? adapted_experts(experts_gate_up_, *gate_up_adapter_, dt)
                                 : experts_gate_up_;
  const at::Tensor down =
      down_adapter_ ? adapted_experts(experts_down_, *down_adapter_, dt) : experts_down_;
  if (experts_group_.size == 1) return kernels_.experts(x, routing, gate_up, down);
  const kernels::DispatchedTokens dispatched =
      kernels_.dispatch(x, routing, num_experts_, experts_group_);
  at::Tensor rows;
  if (dispatched.rows.size(0) > 0) {
    rows = kernels_.experts(dispatched.rows, dispatched.local_routing, gate_up, down);
  } else {
    // No token for this rank's experts: their gradients are zeros, but they take part.
    rows = dispatched.rows + 0 * (gate_up.sum() + down.sum()).to(x.scalar_type());
  }
  return kernels_.combine(rows, dispatched, routing, experts_group_);
}

Tensors Qwen3Block::compute(const at::Tensor& h, const RopeTables& rope,
                            const at::Tensor& document_ids, at::Tensor* keys,
                            at::Tensor* values) const {
  const at::Tensor y = h + attention(norm(kernels_.attention_norm, h, input_norm_), rope,
                                     document_ids, keys, values);
  const at::Tensor x = norm(kernels_.ffn_norm, y, post_norm_);
  if (!sparse_) {
    if (!tp_.active()) return {y + feed_forward(x)};
    return {y + tp_.exit(feed_forward(tp_.enter(x)))};
  }
  at::Tensor flat = x.reshape({-1, x.size(-1)});
  // Tensor parallelism without sequence parallelism: every tp rank holds every token; each
  // routes its share.
  const bool split = tp_.active() && tp_.split_tokens;
  if (split) flat = tp_.split_tokens(flat);
  const kernels::Routing routing =
      kernels_.router(flat, router_, top_k_, norm_topk_prob_, expert_bias_);
  at::Tensor counts;
  {
    at::NoGradGuard no_grad;
    counts = expert_counts(routing.top_experts, num_experts_);
  }
  at::Tensor experts = routed_experts(flat, routing);
  if (split) experts = tp_.gather_tokens(experts);
  return {y + experts.view(x.sizes()), routing.logits, counts};
}

}  // namespace titan::models
