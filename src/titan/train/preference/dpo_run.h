// What training.objective = "dpo" changes in a training run (docs/preference.md), in one place
// so that the trainer only asks: the preference loader instead of the token loader, the DPO
// forward-backward, the reference made ready once the starting weights are in place (the
// trained tensors' reference values, or the precomputed table of the reference's
// log-probabilities, which is a checkpoint part), and the step's DPO metrics summed over the
// ranks for the log.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "titan/config/trainer_config.h"
#include "titan/data/batch_source.h"
#include "titan/data/tokenizer/tokenizer.h"
#include "titan/models/parallel_context.h"
#include "titan/train/preference/dpo_forward_backward.h"
#include "titan/train/state/stateful.h"

namespace titan::train {

bool is_dpo(const config::TrainerConfig& cfg);

class DpoRun : public Stateful {
 public:
  explicit DpoRun(const config::TrainerConfig& cfg) : cfg_(cfg) {}

  // This rank's pairs of each global batch (rank `row_rank` of `row_ranks` batch ranks).
  std::unique_ptr<data::BatchSource> loader(std::shared_ptr<const data::Tokenizer> tokenizer,
                                            int64_t row_rank, int64_t row_ranks);
  // `step_pairs`: the pairs of a step over every rank. Everything must outlive the result.
  std::unique_ptr<ForwardBackward> forward_backward(models::Model& model, const CausalLmLoss& loss,
                                                    distributed::MeshContext& parallel,
                                                    const NamedTensors& params, at::Device device,
                                                    int64_t step_pairs);
  // Once the starting weights are loaded (or, `resumed`, a checkpoint instead): the reference
  // values of the trained tensors, or with dpo.precompute_reference the table (computed now,
  // unless the checkpoint had it; then nothing of the reference is held while training).
  void prepare_reference(const NamedTensors& trained, bool resumed);
  // The step's metric sums over the batch ranks (a small collective, every step), as means
  // over the step's pairs.
  void reduce_metrics(models::ParallelContext& parallel, int64_t step_pairs);
  // Those means, by TRL's names (reads the device).
  std::vector<std::pair<std::string, double>> metrics() const;

  // The table, as a checkpoint part (with dpo.precompute_reference).
  PartState save() const override;
  void load(const PartReader& in) override;

 private:
  const config::TrainerConfig& cfg_;
  std::shared_ptr<const data::Tokenizer> tokenizer_;
  int64_t row_rank_ = 0, row_ranks_ = 1;
  ReferenceWeights reference_;
  DpoForwardBackward* step_ = nullptr;  // owned by the trainer
  at::Device device_ = at::kCPU;
  at::Tensor table_;  // precomputed: float64 [records, 2]
  at::Tensor means_;
};

}  // namespace titan::train
