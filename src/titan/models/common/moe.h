// The routed-experts block of Qwen3-MoE (QWEN3_SPEC.md 2.6) as free functions: a softmax
// top-k router and grouped-GEMM experts, plus the two load-balancing schemes.
#pragma once

#include <ATen/ATen.h>

#include <vector>

namespace titan::models {

struct Routing {
  at::Tensor logits;       // [T, E] router logits in the compute dtype (for the aux loss)
  at::Tensor top_weights;  // [T, k] combine weights, compute dtype (as transformers 5.17)
  at::Tensor top_experts;  // [T, k] int64 expert ids, best first
};

// logits = x W^T; p = softmax(fp32 logits) over all experts; top-k of p (plus `expert_bias`
// if defined, for the choice only: torchtitan's aux-loss-free balancing); the weights are the
// chosen p, renormalised to sum 1 when `norm_topk_prob`, cast to x's dtype.
Routing route_tokens(const at::Tensor& x, const at::Tensor& router_weight, int64_t top_k,
                     bool norm_topk_prob, const at::Tensor& expert_bias = {});

// x [T, H]; gate_up [E, 2*Im, H] (gate rows first), down [E, H, Im]. Tokens are sorted by
// expert (stable) and run through at::_grouped_mm; the k weighted outputs of a token are
// summed in one reduction. Weights are cast to x's dtype at use.
at::Tensor grouped_experts(const at::Tensor& x, const Routing& routing, const at::Tensor& gate_up,
                           const at::Tensor& down);

// Tokens routed to each expert [E] (float32), for the expert-bias update.
at::Tensor expert_load(const at::Tensor& top_experts, int64_t num_experts);

// Hugging Face's load_balancing_loss_func (transformers 5.17, no attention mask): for every
// layer's raw router logits, softmax in their dtype, top-k of that; aux = E * sum_e f_e * P_e
// with f and P averaged over all rows of all layers. Not yet scaled by the coefficient.
at::Tensor load_balancing_loss(const std::vector<at::Tensor>& router_logits, int64_t num_experts,
                               int64_t top_k);

// torchtitan's aux-loss-free update, in place: delta = rate * sign(mean(load) - load), centred
// to zero mean, added to `expert_bias`.
void update_expert_bias(at::Tensor& expert_bias, const at::Tensor& load, double rate);

}  // namespace titan::models
