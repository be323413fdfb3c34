// torchtitan's learning-rate schedule: linear warmup, a stable phase, then a linear, sqrt or
// cosine decay to min_lr_factor (warmup-stable-decay), as a multiplier on optimizer.lr applied
// the way torch's LambdaLR applies it: optimizer step k (k = 0 for the first step) uses
// lr * factor(k). The formula follows torchtitan/components/optimizer/lr_scheduler.py,
// including its adjustments (warmup clipped to the total, decay clipped to what is left, a
// virtual last stable step so the last step's lr is not 0).
#pragma once

#include <cstdint>
#include <string>

#include "titan/config/trainer_config.h"

namespace titan::train {

class LRScheduler {
 public:
  // training_steps is used when lr_scheduler.total_steps is -1. Throws titan::Error for bad
  // values (negative warmup, decay_ratio outside [0, 1], unknown decay_type) naming the key.
  LRScheduler(const config::LRSchedulerConfig& config, int64_t training_steps, double base_lr);

  // The multiplier for 0-indexed optimizer step `step0` (torchtitan's lr_lambda).
  double factor(int64_t step0) const;
  // base_lr * factor(step0): the learning rate optimizer step `step0` uses.
  double lr_at(int64_t step0) const { return base_lr_ * factor(step0); }

  // Resume state: the number of optimizer steps taken (LambdaLR's last_epoch). The trainer
  // may equally keep its own step count and call lr_at directly.
  int64_t steps_taken() const { return steps_taken_; }
  void set_steps_taken(int64_t steps);
  double current_lr() const { return lr_at(steps_taken_); }
  void step() { ++steps_taken_; }

  int64_t warmup_steps() const { return warmup_steps_; }
  int64_t stable_steps() const { return stable_steps_; }
  int64_t decay_steps() const { return decay_steps_; }

 private:
  double base_lr_;
  int64_t warmup_steps_ = 0;
  int64_t stable_steps_ = 0;
  int64_t decay_steps_ = 0;
  std::string decay_type_;
  double min_lr_factor_ = 0;
  int64_t steps_taken_ = 0;
};

}  // namespace titan::train
