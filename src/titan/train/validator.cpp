#include "titan/train/validator.h"

#include <ATen/core/grad_mode.h>

#include "titan/common/error.h"
#include "titan/train/loader_options.h"

namespace titan::train {

Validator::Validator(const config::TrainerConfig& cfg,
                     std::shared_ptr<const data::Tokenizer> tokenizer, int32_t eos_id,
                     int64_t dp_size, int64_t dp_rank)
    : cfg_(cfg) {
  if (!cfg.validator.enable) return;
  // Packed as training packs (document masking included), in file order, and without a
  // prefetch thread: every run seeks back to the start. Each rank keeps its rows of every
  // global batch, as in training.
  data::LoaderOptions options = loader_options(cfg, eos_id);
  options.shuffle_seed.reset();
  options.prefetch = 0;
  options.row_rank = dp_rank;
  options.row_ranks = dp_size;
  loader_.emplace(std::move(tokenizer), cfg.validator.dataset_path, options);
  start_ = loader_->state();
  if (cfg.validator.steps > 0) {
    global_batches_ = cfg.validator.steps;
    return;
  }
  // The whole file: the global batches that fit in one pass (the same count on every rank,
  // since every rank reads the whole stream).
  while (true) {
    loader_->next();
    if (loader_->state().value("epoch", int64_t{0}) != start_.value("epoch", int64_t{0})) break;
    ++global_batches_;
  }
  global_batches_ = std::max<int64_t>(1, global_batches_);
  loader_->load_state(start_);
}

bool Validator::due(int64_t step) const {
  return loader_.has_value() && (step % cfg_.validator.freq == 0 || step == cfg_.training.steps);
}

double Validator::run(const BatchLoss& batch_loss, const SumOverRanks& sum_over_ranks) {
  TITAN_CHECK(loader_.has_value(), "the validator is not enabled (validator.enable)");
  at::NoGradGuard no_grad;
  loader_->load_state(start_);
  double loss = 0, tokens = 0;
  for (int64_t b = 0; b < global_batches_; ++b) {
    const auto [sum, count] = batch_loss(loader_->next());
    loss += sum;
    tokens += count;
  }
  loss = sum_over_ranks(loss);
  tokens = sum_over_ranks(tokens);
  TITAN_CHECK(tokens > 0, "validator.dataset_path ", cfg_.validator.dataset_path,
              " gave no valid label tokens");
  return loss / tokens;
}

}  // namespace titan::train
