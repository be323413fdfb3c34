#include "titan/models/common/moe_layer.h"

#include <ATen/core/grad_mode.h>

#include "titan/common/error.h"
#include "titan/kernels/override_resolver.h"
#include "titan/models/common/moe.h"

namespace titan::models {

using kernels::Op;

MoeLayer::MoeLayer(const MoeConfig& c, const std::string& path, const at::TensorOptions& options,
                   bool expert_bias, const at::TensorOptions& buffer_options,
                   kernels::OverrideResolver& overrides)
    : config_(c) {
  const int64_t E = c.num_experts, H = c.hidden_size, Im = c.intermediate_size;
  gate_up_ = at::empty({E, 2 * Im, H}, options);
  down_ = at::empty({E, H, Im}, options);
  router_ = at::empty({E, H}, options);
  if (expert_bias) {
    const auto fp32 = buffer_options.dtype(at::kFloat);
    expert_bias_ = at::zeros({E}, fp32);
    tokens_per_expert_ = at::zeros({E}, fp32);
  }
  const std::string site = path + ".moe";
  router_fn_ = overrides.function<Op::kMoeRouter>(site);
  experts_fn_ = overrides.function<Op::kMoeExperts>(site);
  dispatch_fn_ = overrides.function<Op::kMoeDispatch>(site);
  combine_fn_ = overrides.function<Op::kMoeCombine>(site);
}

void MoeLayer::visit_parameters(const std::string& prefix, const ParameterVisitor& f) {
  auto adapter = [&](const std::string& weight_name, std::optional<ExpertsAdapter>& a) {
    if (!a) return;
    f(lora_a_name(weight_name), a->a);
    f(lora_b_name(weight_name), a->b);
  };
  f(prefix + "experts.gate_up_proj", gate_up_);
  adapter(prefix + "experts.gate_up_proj", gate_up_adapter_);
  f(prefix + "experts.down_proj", down_);
  adapter(prefix + "experts.down_proj", down_adapter_);
  f(prefix + "gate.weight", router_);
}

void MoeLayer::visit_buffers(const std::string& prefix, const ParameterVisitor& f) {
  if (expert_bias_.defined()) f(prefix + "expert_bias", expert_bias_);
}

void MoeLayer::add_adapter(const std::string& stack, const LoraOptions& lora,
                           const at::TensorOptions& options) {
  TITAN_CHECK(stack == kGateUp || stack == kDown, stack, " is not an expert stack");
  const at::Tensor& w = stack == kGateUp ? gate_up_ : down_;
  std::optional<ExpertsAdapter>& slot = stack == kGateUp ? gate_up_adapter_ : down_adapter_;
  TITAN_CHECK(!slot, stack, " already has a LoRA adapter");
  ExpertsAdapter a;
  a.a = at::empty({w.size(0), lora.rank, w.size(2)}, options);
  a.b = at::empty({w.size(0), w.size(1), lora.rank}, options);
  a.scale = lora.scale();
  slot = std::move(a);
}

at::Tensor MoeLayer::routed(const at::Tensor& x, const kernels::Routing& routing) const {
  // Adapted expert stacks: the experts read W + B A (in the activations' dtype).
  const auto dt = x.scalar_type();
  const at::Tensor gate_up =
      gate_up_adapter_ ? adapted_experts(gate_up_, *gate_up_adapter_, dt) : gate_up_;
  const at::Tensor down = down_adapter_ ? adapted_experts(down_, *down_adapter_, dt) : down_;
  if (group_.size == 1) return experts_fn_(x, routing, gate_up, down);
  const kernels::DispatchedTokens dispatched =
      dispatch_fn_(x, routing, config_.num_experts, group_);
  at::Tensor rows;
  if (dispatched.rows.size(0) > 0) {
    rows = experts_fn_(dispatched.rows, dispatched.local_routing, gate_up, down);
  } else {
    // No token for this rank's experts: their gradients are zeros, but they take part.
    rows = dispatched.rows + 0 * (gate_up.sum() + down.sum()).to(x.scalar_type());
  }
  return combine_fn_(rows, dispatched, routing, group_);
}

MoeOutput MoeLayer::forward(const at::Tensor& x) const {
  // Tensor parallelism without sequence parallelism: every tp rank holds every token; each
  // routes its share.
  const bool split = tp_.active() && tp_.split_tokens;
  const at::Tensor tokens = split ? tp_.split_tokens(x) : x;
  const kernels::Routing routing =
      router_fn_(tokens, router_, config_.top_k, config_.norm_topk_prob, expert_bias_);
  MoeOutput out;
  {
    at::NoGradGuard no_grad;
    out.counts = expert_counts(routing.top_experts, config_.num_experts);
  }
  at::Tensor experts = routed(tokens, routing);
  out.out = split ? tp_.gather_tokens(experts) : experts;
  out.router_logits = routing.logits;
  return out;
}

}  // namespace titan::models
