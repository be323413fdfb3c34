// Test-only driver for the DPO loss and metrics (train/preference/dpo_loss.h), so that
// tests/integration/test_dpo_loss.py can check them against TRL's own DPOTrainer._compute_loss.
//
//   titan_dpo_loss_harness --input IN --output OUT --beta B --loss-types a,b
//                          [--loss-weights w1,w2] [--label-smoothing LS] [--micro-batches M]
//     IN holds "log_probs" [2P, T - 1] (float32: each row's per-token log-probabilities, zero
//     where a token is not a completion target, as TRL's fused head gives them),
//     "completion_mask" [2P, T] (int64, TRL's) and "ref_logps" [2P]; rows are P chosen, then
//     P rejected. Writes "loss" (the step's loss: the micro-batches' shares summed), "grad"
//     (its gradient with respect to log_probs) and "metrics" [6] (dpo_metric_names() order:
//     the sums over pairs divided by P). With M > 1 the pairs are split into M micro-batches
//     whose shares are summed, which must give the same loss as one.
#include <ATen/ATen.h>

#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "titan/checkpoint/safetensors.h"
#include "titan/common/error.h"
#include "titan/common/named_tensors.h"
#include "titan/train/preference/dpo_loss.h"

namespace {

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (!text.empty()) {
    const size_t end = text.find(',', start);
    parts.push_back(text.substr(start, end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return parts;
}

int run(const std::map<std::string, std::string>& flags) {
  namespace tt = titan::train;
  const auto get = [&](const std::string& key, const std::string& fallback) {
    const auto it = flags.find(key);
    TITAN_CHECK(it != flags.end() || !fallback.empty(), "missing --", key);
    return it == flags.end() ? fallback : it->second;
  };
  const auto input = titan::checkpoint::SafetensorsFile::open(get("input", ""));
  tt::DpoSettings settings;
  settings.beta = std::stod(get("beta", ""));
  settings.loss_types = split(get("loss-types", ""));
  settings.loss_weights.clear();
  for (const std::string& w : split(get("loss-weights", "-")))
    if (w != "-") settings.loss_weights.push_back(std::stod(w));
  if (settings.loss_weights.empty()) settings.loss_weights.assign(settings.loss_types.size(), 1.0);
  settings.label_smoothing = std::stod(get("label-smoothing", "0"));
  const int64_t micro_batches = std::stoll(get("micro-batches", "1"));

  const at::Tensor log_probs = input.tensor("log_probs").clone().requires_grad_(true);
  const at::Tensor mask = input.tensor("completion_mask");
  const at::Tensor reference = input.tensor("ref_logps");
  const int64_t P = log_probs.size(0) / 2;
  TITAN_CHECK(P % micro_batches == 0, P, " pairs do not split into ", micro_batches,
              " micro-batches");
  // The chosen rows' targets: the shifted mask, as the labels of a titan batch.
  const at::Tensor labels = at::where(mask.slice(1, 1).ne(0), at::ones_like(mask.slice(1, 1)),
                                      at::full_like(mask.slice(1, 1), -100));
  const double chosen_tokens = static_cast<double>(tt::chosen_label_tokens(labels));
  // Each sequence's sum over its targets (what the model's loss gives: no other token counts).
  const at::Tensor sequence = (log_probs * labels.ne(-100)).sum(1);
  const at::Tensor tokens = mask.sum(1);
  at::Tensor loss = at::zeros({}, log_probs.options());
  at::Tensor metrics = at::zeros({6}, at::kDouble);
  const int64_t per = P / micro_batches;
  for (int64_t m = 0; m < micro_batches; ++m) {
    // Micro-batch m: pairs [m per, (m + 1) per), rows chosen then rejected.
    const auto rows = [&](const at::Tensor& t) {
      return at::cat(
          {t.slice(0, m * per, (m + 1) * per), t.slice(0, P + m * per, P + (m + 1) * per)});
    };
    const tt::PairLogps logps{rows(sequence), rows(reference), rows(tokens)};
    loss = loss + tt::dpo_loss_share(logps, settings, static_cast<double>(P), chosen_tokens);
    metrics += tt::dpo_metric_sums(logps, settings.beta);
  }
  loss.backward();
  titan::NamedTensors out;
  out.emplace_back("loss", loss.detach());
  out.emplace_back("grad", log_probs.grad());
  out.emplace_back("metrics", metrics / static_cast<double>(P));
  titan::checkpoint::write_safetensors(get("output", ""), out);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::map<std::string, std::string> flags;
    for (int i = 1; i + 1 < argc; i += 2) {
      const std::string key = argv[i];
      TITAN_CHECK(key.rfind("--", 0) == 0, "expected --key value, got '", key, "'");
      flags[key.substr(2)] = argv[i + 1];
    }
    return run(flags);
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
