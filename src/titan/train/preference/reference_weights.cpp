#include "titan/train/preference/reference_weights.h"

#include <ATen/core/grad_mode.h>

#include "titan/common/error.h"

namespace titan::train {

void ReferenceWeights::capture(const NamedTensors& trained, bool adapters_off) {
  at::NoGradGuard no_grad;
  trained_.clear();
  held_.clear();
  for (const auto& [name, t] : trained) {
    trained_.push_back(t.detach());
    held_.push_back(adapters_off ? at::zeros_like(t) : t.detach().clone());
  }
  done_ = true;
}

void ReferenceWeights::swap() {
  at::NoGradGuard no_grad;
  // One tensor at a time: the only extra memory is the largest tensor's copy.
  for (size_t i = 0; i < trained_.size(); ++i) {
    const at::Tensor policy = trained_[i].clone();
    trained_[i].copy_(held_[i]);
    held_[i].copy_(policy);
  }
}

void ReferenceWeights::with_reference(const std::function<void()>& forward) {
  TITAN_CHECK(done_, "DPO: the reference weights were not captured before training");
  swap();
  try {
    at::NoGradGuard no_grad;
    forward();
  } catch (...) {
    swap();
    throw;
  }
  swap();
}

}  // namespace titan::train
