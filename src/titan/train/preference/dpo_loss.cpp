#include "titan/train/preference/dpo_loss.h"

#include <ATen/core/grad_mode.h>

#include <cmath>

#include "titan/common/error.h"

namespace titan::train {
namespace {

using at::Tensor;

// The per-pair loss of one TRL loss type other than sft ([P]).
Tensor pair_loss(const std::string& type, const Tensor& chosen_logratio,
                 const Tensor& rejected_logratio, const Tensor& chosen_tokens,
                 const Tensor& rejected_tokens, const DpoSettings& s) {
  const double beta = s.beta, ls = s.label_smoothing;
  const Tensor delta = chosen_logratio - rejected_logratio;
  // Length-normalised delta (ipo, sigmoid_norm): per-token mean logratios.
  const auto normalised = [&] {
    return chosen_logratio / chosen_tokens.clamp_min(1) -
           rejected_logratio / rejected_tokens.clamp_min(1);
  };
  if (type == "sigmoid") return -at::log_sigmoid(beta * delta);
  if (type == "hinge") return at::relu(1 - beta * delta);
  if (type == "ipo") return (normalised() - 1 / (2 * beta)).pow(2);
  if (type == "robust")
    return (-(1 - ls) * at::log_sigmoid(beta * delta) + ls * at::log_sigmoid(-beta * delta)) /
           (1 - 2 * ls);
  if (type == "sigmoid_norm") return -at::log_sigmoid(beta * normalised());
  if (type == "bco_pair")
    return -at::log_sigmoid(beta * chosen_logratio) - at::log_sigmoid(-beta * rejected_logratio);
  if (type == "nca_pair")
    return -at::log_sigmoid(beta * chosen_logratio) -
           0.5 * at::log_sigmoid(-beta * chosen_logratio) -
           0.5 * at::log_sigmoid(-beta * rejected_logratio);
  if (type == "sppo_hard")
    return (chosen_logratio - 0.5 / beta).pow(2) + (rejected_logratio + 0.5 / beta).pow(2);
  if (type == "apo_zero")
    return 1 - at::sigmoid(beta * chosen_logratio) + at::sigmoid(beta * rejected_logratio);
  if (type == "apo_down")
    return at::sigmoid(beta * chosen_logratio) + 1 - at::sigmoid(beta * delta);
  if (type == "exo_pair") {
    // KL(softmax(beta x scores) || [1 - ls, ls]) over {chosen, rejected} (EXO, K = 2).
    const Tensor qw = at::sigmoid(beta * delta), ql = at::sigmoid(-beta * delta);
    return qw * (at::log_sigmoid(beta * delta) - std::log1p(-ls)) +
           ql * (at::log_sigmoid(-beta * delta) - std::log(ls));
  }
  fail("dpo.loss_type \"", type, "\" is not a DPO loss titan has");
}

}  // namespace

DpoSettings dpo_settings(const config::DpoConfig& dpo) {
  DpoSettings s;
  s.beta = dpo.beta;
  s.loss_types = dpo.loss_type;
  s.loss_weights =
      dpo.loss_weights.empty() ? std::vector<double>(dpo.loss_type.size(), 1.0) : dpo.loss_weights;
  s.label_smoothing = dpo.label_smoothing;
  return s;
}

Tensor dpo_loss_share(const PairLogps& logps, const DpoSettings& settings, double step_pairs,
                      double step_chosen_tokens) {
  TITAN_CHECK(logps.policy.dim() == 1 && logps.policy.size(0) % 2 == 0 &&
                  logps.reference.sizes() == logps.policy.sizes() &&
                  logps.completion_tokens.sizes() == logps.policy.sizes(),
              "DPO loss: policy ", logps.policy.sizes(), ", reference ", logps.reference.sizes(),
              " and completion tokens ", logps.completion_tokens.sizes(),
              " must be [2P]: P chosen sequences, then P rejected");
  TITAN_CHECK(settings.loss_weights.size() == settings.loss_types.size(),
              "DPO loss: ", settings.loss_weights.size(), " weights for ",
              settings.loss_types.size(), " loss types");
  const int64_t P = logps.policy.size(0) / 2;
  const Tensor reference = logps.reference.detach().to(logps.policy.scalar_type());
  const Tensor logratio = logps.policy - reference;
  const Tensor tokens = logps.completion_tokens.to(logps.policy.scalar_type());
  const Tensor chosen = logratio.slice(0, 0, P), rejected = logratio.slice(0, P);
  Tensor share = at::zeros({}, logps.policy.options());
  for (size_t k = 0; k < settings.loss_types.size(); ++k) {
    const std::string& type = settings.loss_types[k];
    const double weight = settings.loss_weights[k];
    if (type == "sft") {
      // The chosen rows' summed log-probabilities are the sum of their tokens'.
      share = share - weight * logps.policy.slice(0, 0, P).sum() / step_chosen_tokens;
    } else {
      share = share + weight *
                          pair_loss(type, chosen, rejected, tokens.slice(0, 0, P),
                                    tokens.slice(0, P), settings)
                              .sum() /
                          step_pairs;
    }
  }
  return share;
}

int64_t chosen_label_tokens(const at::Tensor& labels) {
  const int64_t P = labels.size(0) / 2;
  return labels.slice(0, 0, P).ne(-100).sum().item<int64_t>();
}

const std::vector<std::string>& dpo_metric_names() {
  static const std::vector<std::string> names = {"rewards/chosen",     "rewards/rejected",
                                                 "rewards/accuracies", "rewards/margins",
                                                 "logps/chosen",       "logps/rejected"};
  return names;
}

Tensor dpo_metric_sums(const PairLogps& logps, double beta) {
  at::NoGradGuard no_grad;
  // The rewards in the policy's dtype, as TRL compares them; the sums in float64.
  const Tensor policy = logps.policy.detach();
  const Tensor rewards = beta * (policy - logps.reference.detach().to(policy.scalar_type()));
  const int64_t P = policy.size(0) / 2;
  const Tensor chosen = rewards.slice(0, 0, P), rejected = rewards.slice(0, P);
  const auto sum = [](const Tensor& t) { return t.to(at::kDouble).sum(); };
  return at::stack({sum(chosen), sum(rejected), sum(chosen.gt(rejected)), sum(chosen - rejected),
                    sum(policy.slice(0, 0, P)), sum(policy.slice(0, P))});
}

}  // namespace titan::train
