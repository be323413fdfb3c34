#include "titan/models/common/moe.h"

#include <ATen/core/grad_mode.h>

#include "titan/common/error.h"

namespace titan::models {

at::Tensor expert_counts(const at::Tensor& top_experts, int64_t num_experts) {
  return at::bincount(top_experts.reshape({-1}), {}, num_experts);
}

at::Tensor load_balancing_loss(const std::vector<at::Tensor>& router_logits, int64_t num_experts,
                               int64_t top_k) {
  TITAN_CHECK(!router_logits.empty(), "load_balancing_loss needs at least one MoE layer");
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
