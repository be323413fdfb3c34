#include "titan/models/common/moe.h"

#include <ATen/core/grad_mode.h>

namespace titan::models {

Routing route_tokens(const at::Tensor& x, const at::Tensor& router_weight, int64_t top_k,
                     bool norm_topk_prob, const at::Tensor& expert_bias) {
  Routing r;
  r.logits = at::linear(x, router_weight.to(x.scalar_type()));
  const at::Tensor probs = at::softmax(r.logits, -1, at::kFloat);
  at::Tensor top_probs;
  if (expert_bias.defined()) {
    at::Tensor biased;
    {
      at::NoGradGuard no_grad;
      biased = probs.detach() + expert_bias.to(at::kFloat);
      r.top_experts = std::get<1>(at::topk(biased, top_k, -1));
    }
    top_probs = probs.gather(1, r.top_experts);
  } else {
    std::tie(top_probs, r.top_experts) = at::topk(probs, top_k, -1);
  }
  if (norm_topk_prob) top_probs = top_probs / top_probs.sum(-1, /*keepdim=*/true);
  r.top_weights = top_probs.to(x.scalar_type());
  return r;
}

at::Tensor grouped_experts(const at::Tensor& x, const Routing& routing, const at::Tensor& gate_up,
                           const at::Tensor& down) {
  const int64_t num_tokens = x.size(0);
  const int64_t top_k = routing.top_experts.size(1);
  const int64_t num_experts = gate_up.size(0);
  const auto dtype = x.scalar_type();

  at::Tensor perm, token_of_row, offsets, inverse_perm;
  {
    at::NoGradGuard no_grad;
    const at::Tensor flat_experts = routing.top_experts.reshape({-1});
    perm = std::get<1>(at::sort(flat_experts, /*stable=*/true, /*dim=*/0, /*descending=*/false));
    token_of_row = at::div(perm, top_k, "floor");
    offsets = at::cumsum(at::bincount(flat_experts, {}, num_experts), 0, at::kInt);
    inverse_perm = at::empty_like(perm);
    inverse_perm.scatter_(0, perm, at::arange(perm.size(0), perm.options()));
  }
  const at::Tensor rows = x.index_select(0, token_of_row);  // [T*k, H], grouped by expert
  const at::Tensor gate_up_out =
      at::_grouped_mm(rows, gate_up.to(dtype).transpose(-2, -1), offsets);  // [T*k, 2Im]
  const auto halves = gate_up_out.chunk(2, -1);
  const at::Tensor hidden = at::silu(halves[0]) * halves[1];
  const at::Tensor expert_out =
      at::_grouped_mm(hidden, down.to(dtype).transpose(-2, -1), offsets);  // [T*k, H]
  const at::Tensor weights = routing.top_weights.reshape({-1}).index_select(0, perm);
  const at::Tensor weighted = expert_out * weights.unsqueeze(-1);
  // Back to (token, slot) order, then one reduction over the k slots (fp32 accumulation).
  return weighted.index_select(0, inverse_perm).view({num_tokens, top_k, -1}).sum(1);
}

at::Tensor expert_load(const at::Tensor& top_experts, int64_t num_experts) {
  return at::bincount(top_experts.reshape({-1}), {}, num_experts).to(at::kFloat);
}

at::Tensor load_balancing_loss(const std::vector<at::Tensor>& router_logits, int64_t num_experts,
                               int64_t top_k) {
  TORCH_CHECK(!router_logits.empty(), "load_balancing_loss needs at least one layer");
  const auto device = router_logits.front().device();
  at::Tensor counts = at::zeros({num_experts}, at::TensorOptions(device).dtype(at::kFloat));
  at::Tensor prob_sum = at::zeros({num_experts}, at::TensorOptions(device).dtype(at::kFloat));
  double rows = 0;
  for (const auto& logits : router_logits) {
    const at::Tensor probs = at::softmax(logits, -1);
    {
      at::NoGradGuard no_grad;
      const at::Tensor selected = std::get<1>(at::topk(probs, top_k, -1));
      counts = counts + at::bincount(selected.reshape({-1}), {}, num_experts).to(at::kFloat);
    }
    prob_sum = prob_sum + probs.to(at::kFloat).sum(0);
    rows += static_cast<double>(logits.size(0));
  }
  return at::sum((counts / rows) * (prob_sum / rows).unsqueeze(0)) *
         static_cast<double>(num_experts);
}

void update_expert_bias(at::Tensor& expert_bias, const at::Tensor& load, double rate) {
  at::NoGradGuard no_grad;
  const at::Tensor l = load.to(expert_bias.device(), at::kFloat);
  at::Tensor delta = rate * at::sign(l.mean() - l);
  delta = delta - delta.mean();
  expert_bias.add_(delta.to(expert_bias.scalar_type()));
}

}  // namespace titan::models
