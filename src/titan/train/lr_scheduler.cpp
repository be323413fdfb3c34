#include "titan/train/lr_scheduler.h"

#include <cmath>
#include <numbers>

#include "titan/common/error.h"

namespace titan::train {

LRScheduler::LRScheduler(const config::LRSchedulerConfig& config, int64_t training_steps,
                         double base_lr)
    : base_lr_(base_lr), decay_type_(config.decay_type), min_lr_factor_(config.min_lr_factor) {
  const int64_t total = config.total_steps == -1 ? training_steps : config.total_steps;
  TITAN_CHECK(total >= 1, "lr_scheduler.total_steps must be >= 1 (or -1 for training.steps), got ",
              total);
  TITAN_CHECK(config.warmup_steps >= 0, "lr_scheduler.warmup_steps must be >= 0, got ",
              config.warmup_steps);
  TITAN_CHECK(config.decay_ratio == -1.0 || (config.decay_ratio >= 0 && config.decay_ratio <= 1),
              "lr_scheduler.decay_ratio must be in [0, 1] (or -1 to decay after the warmup), got ",
              config.decay_ratio);
  TITAN_CHECK(decay_type_ == "linear" || decay_type_ == "sqrt" || decay_type_ == "cosine",
              "lr_scheduler.decay_type: unknown value '", decay_type_,
              "'; accepted: linear, sqrt, cosine");
  TITAN_CHECK(std::isfinite(min_lr_factor_) && min_lr_factor_ >= 0 && min_lr_factor_ <= 1,
              "lr_scheduler.min_lr_factor must be in [0, 1], got ", min_lr_factor_);

  // torchtitan clips the warmup to the total (with a warning).
  warmup_steps_ = std::min(config.warmup_steps, total);
  if (config.decay_ratio != -1.0) {
    // Python's round(): halves to even, which nearbyint does in the default rounding mode.
    decay_steps_ =
        static_cast<int64_t>(std::nearbyint(static_cast<double>(total) * config.decay_ratio));
    if (warmup_steps_ + decay_steps_ > total) decay_steps_ = total - warmup_steps_;
  } else {
    decay_steps_ = total - warmup_steps_;
  }
  // torchtitan adds a virtual last step so the lr never reaches 0 within the run.
  stable_steps_ = total + 1 - warmup_steps_ - decay_steps_;
}

double LRScheduler::factor(int64_t step0) const {
  const int64_t warmup_stable = warmup_steps_ + stable_steps_;
  if (step0 < warmup_steps_) {
    // 0-indexed step, hence the + 1.
    return static_cast<double>(step0 + 1) / static_cast<double>(warmup_steps_);
  }
  // torchtitan asserts here when decay_steps is 0; that only happens past the last step, where
  // staying at the stable value is the useful answer.
  if (step0 < warmup_stable || decay_steps_ == 0) return 1.0;
  const double progress =
      static_cast<double>(step0 + 1 - warmup_stable) / static_cast<double>(decay_steps_);
  double adjustment;
  if (decay_type_ == "linear")
    adjustment = 1 - progress;
  else if (decay_type_ == "sqrt")
    adjustment = 1 - std::sqrt(progress);
  else
    adjustment = 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
  return min_lr_factor_ + (1 - min_lr_factor_) * adjustment;
}

void LRScheduler::set_steps_taken(int64_t steps) {
  TITAN_CHECK(steps >= 0, "lr_scheduler state: step count must be >= 0, got ", steps);
  steps_taken_ = steps;
}

}  // namespace titan::train
