#include "titan/models/common/moe.h"

#include <ATen/core/grad_mode.h>

#include "titan/common/error.h"

namespace titan::models {

at::Tensor expert_counts(const at::Tensor& top_experts, int64_t num_experts) {
  return at::bincount(top_experts.reshape({-1}), {}, num_experts);
}

LoadBalancingSums load_balancing_sums(const std::vector<at::Tensor>& router_logits,
                                      int64_t num_experts, int64_t top_k) {
  LoadBalancingSums sums;
  const auto device = router_logits.empty() ? at::Device(at::kCPU) : router_logits.front().device();
  sums.selected = at::zeros({num_experts}, at::TensorOptions(device).dtype(at::kFloat));
  if (router_logits.empty()) return sums;
  sums.probabilities = at::zeros({num_experts}, at::TensorOptions(device).dtype(at::kFloat));
  for (const auto& logits : router_logits) {
    const at::Tensor probs = at::softmax(logits, -1);
    {
      at::NoGradGuard no_grad;
      const at::Tensor chosen = std::get<1>(at::topk(probs, top_k, -1));
      sums.selected =
          sums.selected + at::bincount(chosen.reshape({-1}), {}, num_experts).to(at::kFloat);
    }
    sums.probabilities = sums.probabilities + probs.to(at::kFloat).sum(0);
    sums.rows += static_cast<double>(logits.size(0));
  }
  return sums;
}

at::Tensor load_balancing_loss(const LoadBalancingSums& sums, int64_t num_experts) {
  if (!sums.probabilities.defined()) return {};
  TITAN_CHECK(sums.rows > 0, "load_balancing_loss: no rows");
  return at::sum((sums.selected / sums.rows) * (sums.probabilities / sums.rows).unsqueeze(0)) *
         static_cast<double>(num_experts);
}

at::Tensor load_balancing_loss(const std::vector<at::Tensor>& router_logits, int64_t num_experts,
                               int64_t top_k) {
  TITAN_CHECK(!router_logits.empty(), "load_balancing_loss needs at least one MoE layer");
  return load_balancing_loss(load_balancing_sums(router_logits, num_experts, top_k), num_experts);
}

void update_expert_bias(at::Tensor& expert_bias, const at::Tensor& load, double rate) {
  at::NoGradGuard no_grad;
  const at::Tensor l = load.to(expert_bias.device(), at::kFloat);
  at::Tensor delta = rate * at::sign(l.mean() - l);
  delta = delta - delta.mean();
  expert_bias.add_(delta.to(expert_bias.scalar_type()));
}

}  // namespace titan::models
