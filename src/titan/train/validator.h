// The held-out loss of validator.* (torchtitan's validator): every validator.freq steps and at
// the last step, the mean token loss of the first validator.steps global batches of
// validator.dataset_path (all of it when -1), the same batches every time. Under data
// parallelism each rank evaluates its rows of every batch, as in training.
#pragma once

#include <functional>
#include <memory>
#include <optional>

#include "titan/config/trainer_config.h"
#include "titan/data/data_loader.h"

namespace titan::train {

class Validator {
 public:
  // (summed token loss, valid tokens) of one local batch.
  using BatchLoss = std::function<std::pair<double, double>(const data::Batch&)>;
  // The sum of a value over the data-parallel ranks.
  using SumOverRanks = std::function<double(double)>;

  // Disabled (due() is always false) unless cfg.validator.enable. This rank reads rows
  // `dp_rank` of every run of `dp_size` local batches (the data loader's row rank).
  Validator(const config::TrainerConfig& cfg, std::shared_ptr<const data::Tokenizer> tokenizer,
            int32_t eos_id, int64_t dp_size, int64_t dp_rank);

  bool due(int64_t step) const;
  // The mean token loss over the validation batches.
  double run(const BatchLoss& batch_loss, const SumOverRanks& sum_over_ranks);
  int64_t global_batches() const { return global_batches_; }

 private:
  const config::TrainerConfig& cfg_;
  std::optional<data::DataLoader> loader_;  // of this rank's rows
  nlohmann::json start_;                    // the loader's state before the first batch
  int64_t global_batches_ = 0;
};

}  // namespace titan::train
