// AdamW with decoupled weight decay, numerically the same as torch.optim.AdamW in each of its
// three implementations (optimizer.implementation):
//   fused    -> at::_fused_adamw_ over each group's tensors (CPU and CUDA kernels),
//   foreach  -> the at::_foreach_* sequence of torch's _multi_tensor_adam,
//   for-loop -> the per-tensor ops of torch's _single_tensor_adam.
// State is created lazily when a parameter first has a gradient, as in torch; parameters
// without a gradient are skipped by step().
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "titan/config/trainer_config.h"
#include "titan/train/param_groups.h"

namespace titan::train {

class AdamW {
 public:
  // Keeps references to the parameter tensors (updated in place). Throws titan::Error for a
  // bad config value (betas, eps, implementation, param_groups) naming the key.
  AdamW(const NamedTensors& params, const config::OptimizerConfig& config);

  // One update with learning rate `lr` (the scheduler's value for this step) using p.grad().
  void step(double lr);
  // Drops every gradient (torch's zero_grad(set_to_none=True)).
  void zero_grad();
  // Runs `hook` at the end of every step() (torch's register_step_post_hook); the model spec's
  // post_optimizer_build registers its per-step work here.
  void add_step_post_hook(std::function<void()> hook) {
    step_post_hooks_.push_back(std::move(hook));
  }

  // The state for an exact resume, keyed "<param>.exp_avg", "<param>.exp_avg_sq" and
  // "<param>.step" (a float32 scalar), for every parameter that has taken a step. The tensors
  // are the live ones (copy before modifying).
  NamedTensors state() const;
  // Restores state() output (any device/dtype; copied into place). Unknown keys, missing
  // companions and shape mismatches throw titan::Error naming the tensor.
  void load_state(const NamedTensors& state);

  const std::vector<ParamGroup>& groups() const { return groups_; }
  const NamedTensors& params() const { return params_; }
  const std::string& implementation() const { return implementation_; }

 private:
  struct Slot {
    double weight_decay = 0;
    at::Tensor exp_avg;  // undefined until the first step with a gradient
    at::Tensor exp_avg_sq;
    at::Tensor step;  // float32 scalar; on the parameter's device for "fused", else CPU
  };
  // Tensors of one (weight decay, device, dtype) bucket, in parameter order.
  struct Bucket {
    double weight_decay = 0;
    std::vector<at::Tensor> params, grads, exp_avgs, exp_avg_sqs, steps;
  };

  void init_slot(size_t index);
  std::vector<Bucket> buckets_with_grads();
  void step_fused(Bucket& b, double lr) const;
  void step_foreach(Bucket& b, double lr) const;
  void step_for_loop(Bucket& b, double lr) const;

  NamedTensors params_;
  std::vector<ParamGroup> groups_;
  std::vector<Slot> slots_;  // one per parameter
  std::string implementation_;
  std::vector<std::function<void()>> step_post_hooks_;
  double beta1_ = 0.9, beta2_ = 0.999, eps_ = 1e-8;
};

}  // namespace titan::train
