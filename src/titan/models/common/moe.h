// Load balancing of the routed experts of Qwen3-MoE (docs/qwen3.md section 2.6): Hugging Face's
// auxiliary loss and torchtitan's aux-loss-free expert-bias update. The router and the experts
// themselves are overridable ops (kernels/ops.h: moe_router, moe_experts).
#pragma once

#include <ATen/ATen.h>

#include <vector>

namespace titan::models {

// Tokens routed to each expert [E] (int64), for the expert-bias update.
at::Tensor expert_counts(const at::Tensor& top_experts, int64_t num_experts);

// The sums Hugging Face's load-balancing loss is made of, over some layers' raw router logits
// (softmax in their dtype, top-k of that): per expert the rows that selected it (float32, no
// gradient) and the summed probabilities (float32, with gradient; undefined with no layer),
// and the rows counted (rows x layers). A pipeline adds the selections and rows of every
// stage's layers and gives each stage the totals (docs/distributed.md).
struct LoadBalancingSums {
  at::Tensor selected;
  at::Tensor probabilities;
  double rows = 0;
};
LoadBalancingSums load_balancing_sums(const std::vector<at::Tensor>& router_logits,
                                      int64_t num_experts, int64_t top_k);
// E * sum_e (selected_e / rows) (probabilities_e / rows): with the sums of every layer, Hugging
// Face's loss; with every layer's selections and rows but one stage's probabilities, that
// stage's share, whose sum over the stages is the loss and whose gradient is the loss's
// (the selections have none). Undefined when `probabilities` is.
at::Tensor load_balancing_loss(const LoadBalancingSums& sums, int64_t num_experts);

// Hugging Face's load_balancing_loss_func (transformers 5.17, no attention mask): for every
// layer's raw router logits, softmax in their dtype, top-k of that; aux = E * sum_e f_e * P_e
// with f and P averaged over all rows of all layers. Not yet scaled by the coefficient.
at::Tensor load_balancing_loss(const std::vector<at::Tensor>& router_logits, int64_t num_experts,
                               int64_t top_k);

// torchtitan's aux-loss-free update, in place: delta = rate * sign(mean(load) - load), centred
// to zero mean, added to `expert_bias`.
void update_expert_bias(at::Tensor& expert_bias, const at::Tensor& load, double rate);

}  // namespace titan::models
