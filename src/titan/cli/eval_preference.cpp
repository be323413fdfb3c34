#include "titan/cli/eval_preference.h"

#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "titan/cli/model_source.h"
#include "titan/common/error.h"
#include "titan/common/heap_reuse.h"
#include "titan/config/validate.h"
#include "titan/data/preference_loader.h"
#include "titan/train/loader_options.h"
#include "titan/train/loss.h"
#include "titan/train/precision.h"
#include "titan/train/preference/dpo_forward_backward.h"
#include "titan/train/preference/dpo_loss.h"
#include "titan/train/preference/preference_options.h"

namespace titan::cli {
namespace {

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

// Each row's summed completion log-probability under `model` (float32 [2P]).
at::Tensor logps_of(LoadedModel& model, const train::CausalLmLoss& loss, const data::Batch& rows,
                    at::Device device) {
  const models::ModelOutput out =
      model.model->forward_packed(rows.inputs.to(device), train::packed_documents(rows, device));
  return train::sequence_logps(loss, out.hidden, rows.labels);
}

}  // namespace

const std::vector<std::string>& dpo_eval_flags() {
  static const std::vector<std::string> flags = {
      "--objective", "--reference", "--beta", "--loss-type", "--max-length", "--truncation-mode"};
  return flags;
}

int run_eval_dpo(const FlagParser& flags) {
  // The dpo section as training reads it, from eval's flags.
  config::TrainerConfig cfg;
  cfg.training.objective = "dpo";
  cfg.training.shuffle = false;
  cfg.training.local_batch_size = flags.get_int("--batch-size", 1);
  cfg.dpo.beta = flags.get_double("--beta", cfg.dpo.beta);
  cfg.dpo.loss_type = split_commas(flags.get("--loss-type", "sigmoid"));
  cfg.dpo.max_length = flags.get_int("--max-length", cfg.dpo.max_length);
  cfg.dpo.truncation_mode = flags.get("--truncation-mode", cfg.dpo.truncation_mode);
  TITAN_CHECK(cfg.training.local_batch_size >= 1, "titan eval: --batch-size must be positive");
  for (const std::string& type : cfg.dpo.loss_type)
    TITAN_CHECK(std::find(config::dpo_loss_names().begin(), config::dpo_loss_names().end(), type) !=
                    config::dpo_loss_names().end(),
                "titan eval: --loss-type ", type, " is not a DPO loss titan has");
  TITAN_CHECK(cfg.dpo.beta > 0, "titan eval: --beta must be > 0");
  const train::DpoSettings settings = train::dpo_settings(cfg.dpo);

  models::BuildOptions options;
  options.device = train::resolve_device(flags.get("--device", "auto"));
  LoadedModel policy = load_model(flags.require("--model"), options);
  LoadedModel reference = load_model(flags.require("--reference"), options);
  keep_freed_blocks_for_reuse();
  cfg.model.hf_assets_path = flags.get("--tokenizer", policy.tokenizer_dir);
  TITAN_CHECK(!cfg.model.hf_assets_path.empty(),
              "titan eval: no tokenizer.json next to the model; pass --tokenizer DIR");
  auto tokenizer = std::make_shared<const data::Tokenizer>(
      data::Tokenizer::from_directory(cfg.model.hf_assets_path));
  data::PreferenceLoader pairs(tokenizer, flags.require("--data"),
                               train::preference_loader_options(cfg, *tokenizer));
  const train::CausalLmLoss policy_loss(*policy.model, nullptr);
  const train::CausalLmLoss reference_loss(*reference.model, nullptr);

  at::NoGradGuard no_grad;
  // Every pair of the file once, in file order.
  std::vector<at::Tensor> chosen[3], rejected[3];  // policy, reference, completion tokens
  std::set<int64_t> seen;
  int64_t chosen_tokens = 0;
  while (true) {
    const nlohmann::json at = pairs.state();
    if (at["epoch"].get<int64_t>() > 0 || at["record"].get<int64_t>() >= pairs.records()) break;
    const data::PairBatch b = pairs.next_pairs();
    const int64_t P = b.records.size(0);
    const at::Tensor p = logps_of(policy, policy_loss, b.rows, options.device).cpu();
    const at::Tensor r = logps_of(reference, reference_loss, b.rows, options.device).cpu();
    const at::Tensor valid = b.rows.labels.ne(train::kIgnoreIndex).sum(1);
    for (int64_t i = 0; i < P; ++i) {
      if (!seen.insert(b.records[i].item<int64_t>()).second) continue;  // the next epoch's
      const at::Tensor rows[3] = {p, r, b.completion_tokens};
      for (int k = 0; k < 3; ++k) {
        chosen[k].push_back(rows[k].slice(0, i, i + 1));
        rejected[k].push_back(rows[k].slice(0, P + i, P + i + 1));
      }
      chosen_tokens += valid[i].item<int64_t>();
    }
  }
  const auto both = [&](int k) { return at::cat({at::cat(chosen[k]), at::cat(rejected[k])}); };
  const train::PairLogps logps{both(0), both(1), both(2)};
  const double n = static_cast<double>(seen.size());
  const double loss =
      train::dpo_loss_share(logps, settings, n,
                            static_cast<double>(std::max<int64_t>(1, chosen_tokens)))
          .item<double>();
  const at::Tensor means = train::dpo_metric_sums(logps, settings.beta) / n;
  nlohmann::json out = {{"loss", loss}};
  const std::vector<std::string>& names = train::dpo_metric_names();
  for (size_t i = 0; i < names.size(); ++i)
    out[names[i]] = means[static_cast<int64_t>(i)].item<double>();
  out["pairs"] = seen.size();
  std::cout << out.dump() << std::endl;
  return 0;
}

}  // namespace titan::cli
