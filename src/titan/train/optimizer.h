// AdamW with decoupled weight decay, numerically the same as torch.optim.AdamW in each of its
// three implementations (optimizer.implementation):
//   fused    -> at::_fused_adamw_ over each group's tensors (CPU and CUDA kernels),
//   foreach  -> the at::_foreach_* sequence of torch's _multi_tensor_adam,
//   for-loop -> the per-tensor ops of torch's _single_tensor_adam.
// With optimizer.name AdamW8bit it is bitsandbytes' AdamW8bit instead (docs/optimizers.md):
// the moments of every parameter of at least optimizer.min_8bit_size elements are held in
// 8-bit blocks (kernels/adamw8bit.h; fused -> the one-pass kernel, for-loop -> bitsandbytes'
// sequence of ops), the smaller ones in float32 with bitsandbytes' 32-bit update.
// State is created lazily when a parameter first has a gradient, as in torch; parameters
// without a gradient are skipped by step().
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "titan/common/placement.h"
#include "titan/config/trainer_config.h"
#include "titan/distributed/parameter_placements.h"
#include "titan/kernels/blockwise_8bit.h"
#include "titan/train/param_groups.h"

namespace titan::train {

class AdamW {
 public:
  // Keeps references to the parameter tensors (updated in place). Throws titan::Error for a
  // bad config value (betas, eps, implementation, param_groups) naming the key. `placements`
  // (may be null: every parameter whole) says how parallelism split each parameter; AdamW8bit
  // keeps 8-bit states only where every rank's piece is made of whole blocks
  // (block_layout.h). It must outlive the optimizer.
  AdamW(const NamedTensors& params, const config::OptimizerConfig& config,
        const distributed::ParameterPlacements* placements = nullptr);

  // One update with learning rate `lr` (the scheduler's value for this step) using p.grad().
  void step(double lr);
  // Drops every gradient (torch's zero_grad(set_to_none=True)).
  void zero_grad();
  // Runs `hook` at the end of every step() (torch's register_step_post_hook); the model spec's
  // post_optimizer_build registers its per-step work here.
  void add_step_post_hook(std::function<void()> hook) {
    step_post_hooks_.push_back(std::move(hook));
  }

  // The state for an exact resume, keyed "<param>.exp_avg", "<param>.exp_avg_sq" (or the
  // 8-bit "<param>.exp_avg_codes", "<param>.exp_avg_absmax", "<param>.exp_avg_sq_codes",
  // "<param>.exp_avg_sq_absmax") and "<param>.step" (a float32 scalar), for every parameter
  // that has taken a step (optimizer_state_names.h). The tensors are the live ones (copy before
  // modifying); an absmax is viewed in its saved layout (block_layout.h).
  NamedTensors state() const;
  // Restores state() output (any device/dtype; copied into place). Float32 moments given to a
  // parameter with 8-bit states are quantised, and 8-bit ones given to a parameter with
  // float32 states dequantised (resuming AdamW with AdamW8bit and the reverse; the counts are
  // in conversions()). Unknown keys, missing companions and shape mismatches throw titan::Error
  // naming the tensor.
  void load_state(const NamedTensors& state);
  struct Conversions {
    int64_t quantized = 0;    // parameters whose float32 moments were quantised
    int64_t dequantized = 0;  // parameters whose 8-bit moments were dequantised
  };
  const Conversions& conversions() const { return conversions_; }

  const std::vector<ParamGroup>& groups() const { return groups_; }
  const NamedTensors& params() const { return params_; }
  const std::string& name() const { return name_; }
  const std::string& implementation() const { return implementation_; }
  // Where parallelism placed parameter `name` (nullptr: whole on this rank).
  const TensorPlacement* placement_of(const std::string& name) const;
  // Whether parameter `index` (of params()) has 8-bit states.
  bool eight_bit(size_t index) const { return slots_[index].eight_bit; }
  // The AdamW8bit parameters of at least min_8bit_size elements that keep float32 states
  // because parallelism cuts their blocks (block_layout.h).
  const std::vector<std::string>& float32_by_layout() const { return float32_by_layout_; }
  // The bytes of this rank's moments (and their scales) once every parameter has stepped.
  double state_bytes() const;
  // After load_state: a warning when it converted moments between AdamW and AdamW8bit.
  std::optional<std::string> conversion_warning() const;

 private:
  struct Slot {
    double weight_decay = 0;
    bool eight_bit = false;  // AdamW8bit's 8-bit states, else float32 moments
    at::Tensor exp_avg;      // undefined until the first step with a gradient
    at::Tensor exp_avg_sq;
    kernels::BlockwiseQuantized exp_avg_8bit, exp_avg_sq_8bit;  // 8-bit: codes and absmax
    at::Tensor step;  // float32 scalar; on the parameter's device for AdamW "fused", else CPU
    bool has_state() const { return step.defined(); }
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
  void step_8bit(double lr);
  // The shape of parameter `index`'s absmax as state() gives it.
  std::vector<int64_t> absmax_view(size_t index) const;

  NamedTensors params_;
  const distributed::ParameterPlacements* placements_ = nullptr;
  std::string name_;
  Conversions conversions_;
  std::vector<std::string> float32_by_layout_;
  std::vector<ParamGroup> groups_;
  std::vector<Slot> slots_;  // one per parameter
  std::string implementation_;
  std::vector<std::function<void()>> step_post_hooks_;
  double beta1_ = 0.9, beta2_ = 0.999, eps_ = 1e-8;
};

}  // namespace titan::train
