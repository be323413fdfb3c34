#include "titan/train/preference/dpo_run.h"

#include "titan/checkpoint/training_checkpoint.h"
#include "titan/common/error.h"
#include "titan/data/preference_loader.h"
#include "titan/train/preference/preference_options.h"

namespace titan::train {

bool is_dpo(const config::TrainerConfig& cfg) { return cfg.training.objective == "dpo"; }

std::unique_ptr<data::BatchSource> DpoRun::loader(std::shared_ptr<const data::Tokenizer> tokenizer,
                                                  int64_t row_rank, int64_t row_ranks) {
  tokenizer_ = tokenizer;
  row_rank_ = row_rank;
  row_ranks_ = row_ranks;
  data::PreferenceLoaderOptions options = preference_loader_options(cfg_, *tokenizer);
  options.row_rank = row_rank;
  options.row_ranks = row_ranks;
  return std::make_unique<data::PreferenceLoader>(std::move(tokenizer), cfg_.training.dataset_path,
                                                  options);
}

std::unique_ptr<ForwardBackward> DpoRun::forward_backward(models::Model& model,
                                                          const CausalLmLoss& loss,
                                                          distributed::MeshContext& parallel,
                                                          const NamedTensors& params,
                                                          at::Device device, int64_t step_pairs) {
  auto step = std::make_unique<DpoForwardBackward>(model, loss, parallel, params, device,
                                                   dpo_settings(cfg_.dpo), reference_, step_pairs);
  step_ = step.get();
  device_ = device;
  return step;
}

void DpoRun::prepare_reference(const NamedTensors& trained, bool resumed) {
  const bool adapters_off = cfg_.dpo.reference == "adapters_off";
  if (!cfg_.dpo.precompute_reference) {
    TITAN_CHECK(!resumed || adapters_off,
                "resuming a DPO run with dpo.reference = \"initial\": the starting weights the "
                "reference holds are not in the checkpoint; start the run anew, use "
                "dpo.precompute_reference = true (its table is in the checkpoint), or under "
                "LoRA dpo.reference = \"adapters_off\"");
    reference_.capture(trained, adapters_off);
    return;
  }
  if (!table_.defined()) {
    TITAN_CHECK(!resumed,
                "resuming a DPO run with dpo.precompute_reference = true from a "
                "checkpoint without the reference's table (part '",
                checkpoint::kDpoReferencePart, "'): it was saved by a run without it");
    // Every record in file order, this rank's pairs of each global batch.
    data::PreferenceLoaderOptions options = preference_loader_options(cfg_, *tokenizer_);
    options.row_rank = row_rank_;
    options.row_ranks = row_ranks_;
    options.shuffle_seed.reset();
    options.prefetch = 0;
    data::PreferenceLoader pairs(tokenizer_, cfg_.training.dataset_path, options);
    if (adapters_off) reference_.capture(trained, /*adapters_off=*/true);
    table_ = step_->precompute(pairs, pairs.records(), adapters_off ? &reference_ : nullptr);
    reference_ = ReferenceWeights();  // nothing of the reference is held from here on
  }
  step_->use_table(&table_);
}

void DpoRun::reduce_metrics(models::ParallelContext& parallel, int64_t step_pairs) {
  at::Tensor sums = step_->metric_sums().clone();
  parallel.all_reduce("batch", sums);
  means_ = sums / static_cast<double>(step_pairs);
}

std::vector<std::pair<std::string, double>> DpoRun::metrics() const {
  std::vector<std::pair<std::string, double>> out;
  if (!means_.defined()) return out;
  const at::Tensor host = means_.to(at::kCPU);
  const std::vector<std::string>& names = dpo_metric_names();
  for (size_t i = 0; i < names.size(); ++i)
    out.emplace_back(names[i], host[static_cast<int64_t>(i)].item<double>());
  return out;
}

PartState DpoRun::save() const {
  PartState s;
  if (table_.defined()) s.tensors.emplace_back("reference_logps", table_.to(at::kCPU));
  s.state = nullptr;
  return s;
}

void DpoRun::load(const PartReader& in) {
  if (!in.contains("reference_logps")) return;
  table_ = in.read("reference_logps").to(device_, at::kDouble);
}

}  // namespace titan::train
