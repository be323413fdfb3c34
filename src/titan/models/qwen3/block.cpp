#include "titan/models/qwen3/block.h"

#include <ATen/core/grad_mode.h>

#include <cmath>

#include "titan/kernels/override_resolver.h"
#include "titan/models/common/activation_checkpoint.h"
#include "titan/models/common/moe.h"

namespace titan::models {
namespace {

using kernels::Op;

at::Tensor cast(const at::Tensor& t, at::ScalarType dtype) { return t.defined() ? t.to(dtype) : t; }

}  // namespace

Qwen3Block::Qwen3Block(const Qwen3Args& a, int64_t index, bool with_expert_bias,
                       const at::TensorOptions& options, kernels::OverrideResolver& overrides)
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
  q_proj_ = make({q_out, H});
  k_proj_ = make({kv_out, H});
  v_proj_ = make({kv_out, H});
  o_proj_ = make({H, q_out});
  if (a.attention_bias) {
    q_bias_ = make({q_out});
    k_bias_ = make({kv_out});
    v_bias_ = make({kv_out});
    o_bias_ = make({H});
  }
  q_norm_ = make({d});
  k_norm_ = make({d});
  if (sparse_) {
    const int64_t E = a.num_experts, Im = a.moe_intermediate_size;
    experts_gate_up_ = make({E, 2 * Im, H});
    experts_down_ = make({E, H, Im});
    router_ = make({E, H});
    if (with_expert_bias) {
      const auto fp32 = options.dtype(at::kFloat);
      expert_bias_ = at::zeros({E}, fp32);
      tokens_per_expert_ = at::zeros({E}, fp32);
    }
  } else {
    gate_proj_ = make({a.intermediate_size, H});
    up_proj_ = make({a.intermediate_size, H});
    down_proj_ = make({H, a.intermediate_size});
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
}

void Qwen3Block::visit_parameters(const ParameterVisitor& f) {
  const std::string& p = prefix_;
  auto linear = [&](const std::string& name, at::Tensor& w, at::Tensor& b) {
    f(p + name + ".weight", w);
    if (b.defined()) f(p + name + ".bias", b);
  };
  linear("self_attn.q_proj", q_proj_, q_bias_);
  linear("self_attn.k_proj", k_proj_, k_bias_);
  linear("self_attn.v_proj", v_proj_, v_bias_);
  linear("self_attn.o_proj", o_proj_, o_bias_);
  f(p + "self_attn.q_norm.weight", q_norm_);
  f(p + "self_attn.k_norm.weight", k_norm_);
  if (sparse_) {
    f(p + "mlp.experts.gate_up_proj", experts_gate_up_);
    f(p + "mlp.experts.down_proj", experts_down_);
    f(p + "mlp.gate.weight", router_);
  } else {
    f(p + "mlp.gate_proj.weight", gate_proj_);
    f(p + "mlp.up_proj.weight", up_proj_);
    f(p + "mlp.down_proj.weight", down_proj_);
  }
  f(p + "input_layernorm.weight", input_norm_);
  f(p + "post_attention_layernorm.weight", post_norm_);
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
  auto project = [&](const at::Tensor& w, const at::Tensor& b) {
    return at::linear(x, w.to(dt), cast(b, dt)).view({B, S, -1, d});
  };
  const at::Tensor q_normed = norm(kernels_.q_norm, project(q_proj_, q_bias_), q_norm_);
  const at::Tensor k_normed = norm(kernels_.k_norm, project(k_proj_, k_bias_), k_norm_);
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
  at::Tensor v = project(v_proj_, v_bias_).transpose(1, 2);
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
  if (!tp_.active()) return at::linear(o, o_proj_.to(dt), cast(o_bias_, dt));
  // Row-parallel: this rank's heads' share, summed over tp before the bias.
  const at::Tensor out = tp_.exit(at::linear(o, o_proj_.to(dt)));
  return o_bias_.defined() ? out + o_bias_.to(dt) : out;
}

at::Tensor Qwen3Block::routed_experts(const at::Tensor& x, const kernels::Routing& routing) const {
  if (experts_group_.size == 1)
    return kernels_.experts(x, routing, experts_gate_up_, experts_down_);
  const kernels::DispatchedTokens dispatched =
      kernels_.dispatch(x, routing, num_experts_, experts_group_);
  at::Tensor rows;
  if (dispatched.rows.size(0) > 0) {
    rows = kernels_.experts(dispatched.rows, dispatched.local_routing, experts_gate_up_,
                            experts_down_);
  } else {
    // No token for this rank's experts: their gradients are zeros, but they take part.
    rows = dispatched.rows + 0 * (experts_gate_up_.sum() + experts_down_.sum()).to(x.scalar_type());
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
    if (!tp_.active()) return {y + kernels_.feed_forward(x, gate_proj_, up_proj_, down_proj_)};
    return {y + tp_.exit(kernels_.feed_forward(tp_.enter(x), gate_proj_, up_proj_, down_proj_))};
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
