// The DPO objective and its metrics as TRL 1.16's DPOTrainer defines them
// (DPOTrainer._compute_loss; docs/preference.md), on the per-sequence log-probabilities of a
// micro-batch of P pairs, rows [chosen; rejected]:
//   logratio    = policy logp - reference logp                   (per sequence)
//   delta       = chosen logratio - rejected logratio            (per pair)
//   sigmoid       -log sigmoid(beta delta)
//   hinge         relu(1 - beta delta)
//   ipo           (d - 1 / (2 beta))^2, d the difference of the length-normalised logratios
//   robust        (-(1 - ls) log sigmoid(beta delta) + ls log sigmoid(-beta delta)) / (1 - 2 ls)
//   sigmoid_norm  -log sigmoid(beta d)
//   bco_pair, nca_pair, sppo_hard, apo_zero, apo_down, exo_pair  as TRL writes them
//   sft           the chosen completions' mean token loss
// loss = sum_k weight_k * (mean over pairs of loss_k). Each loss but sft is a mean over pairs
// and sft a mean over the chosen completions' tokens, so the loss is written here as sums with
// divisors: a micro-batch's share of a step's loss is its sums over the step's totals (pairs,
// chosen tokens), and the shares of every micro-batch on every rank add up to the step's loss.
// For one micro-batch on one rank this is TRL's loss exactly.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "titan/config/trainer_config.h"

namespace titan::train {

struct DpoSettings {
  double beta = 0.1;
  std::vector<std::string> loss_types = {"sigmoid"};
  std::vector<double> loss_weights = {1.0};  // one per loss type
  double label_smoothing = 0.0;
};
// The dpo section (validated: config/validate.h), empty loss_weights made 1 each.
DpoSettings dpo_settings(const config::DpoConfig& dpo);

// One micro-batch's sequences, rows [chosen; rejected] (P pairs, 2P rows).
struct PairLogps {
  at::Tensor policy;     // float [2P]: summed log-probability of each completion; with grad
  at::Tensor reference;  // float [2P]: the same under the reference model; no grad
  // [2P]: each sequence's completion tokens (Batch::completion_tokens), which ipo and
  // sigmoid_norm normalise by (clamped to at least 1, as TRL does).
  at::Tensor completion_tokens;
};

// This micro-batch's share of the step's loss (a scalar with the policy's gradient), given the
// step's number of pairs and of the chosen completions' predicted tokens (the sft term's
// divisor; chosen_label_tokens).
at::Tensor dpo_loss_share(const PairLogps& logps, const DpoSettings& settings, double step_pairs,
                          double step_chosen_tokens);

// The number of labels that are not ignored in the chosen rows (the first half) of `labels`
// [2P, T]: the tokens whose log-probabilities make the chosen sequences' sums.
int64_t chosen_label_tokens(const at::Tensor& labels);

// The metrics TRL logs, in this order (the names of metrics.jsonl and TensorBoard):
// rewards/chosen, rewards/rejected, rewards/accuracies, rewards/margins, logps/chosen,
// logps/rejected.
const std::vector<std::string>& dpo_metric_names();
// Their sums over the micro-batch's pairs (float64 [6], no grad); summed over a step's
// micro-batches and ranks and divided by its pairs they are TRL's means. A reward is
// beta x logratio; an accuracy counts chosen reward > rejected reward.
at::Tensor dpo_metric_sums(const PairLogps& logps, double beta);

}  // namespace titan::train
