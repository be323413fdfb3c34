// The routed experts of Qwen3-MoE: a softmax top-k router, and experts run as two grouped GEMMs
// (at::_grouped_mm) over the tokens sorted by expert.
#include <ATen/core/grad_mode.h>

#include "titan/kernels/reference/reference.h"

namespace titan::kernels::reference {

Routing moe_router(const at::Tensor& x, const at::Tensor& router_weight, int64_t top_k,
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
  // transformers 5.17 casts the combine weights to the activations' dtype.
  r.top_weights = top_probs.to(x.scalar_type());
  return r;
}

at::Tensor moe_experts(const at::Tensor& x, const Routing& routing, const at::Tensor& gate_up,
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
  // Back to (token, slot) order, then one reduction over the k slots.
  return weighted.index_select(0, inverse_perm).view({num_tokens, top_k, -1}).sum(1);
}

}  // namespace titan::kernels::reference
