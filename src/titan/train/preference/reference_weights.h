// DPO's reference model without a second model (docs/preference.md, memory): the policy's own
// modules, wrappers and parallel layout, with the tensors the optimizer trains swapped for the
// reference's values during the reference's forward, and swapped back after it. Only the
// trained tensors are held twice (this rank's shards of them): the whole model under full
// fine-tuning, the adapters alone under LoRA/QLoRA, whose frozen base is never copied.
//   initial       the trained tensors as they were when captured (the starting weights);
//   adapters_off  LoRA's adapters at zero: the base alone (TRL's reference for a PEFT model).
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <vector>

#include "titan/common/named_tensors.h"

namespace titan::train {

class ReferenceWeights {
 public:
  // Holds the reference values of `trained` (the optimizer's tensors): their values now, or
  // zeros with `adapters_off`.
  void capture(const NamedTensors& trained, bool adapters_off);
  bool captured() const { return done_; }

  // Runs `forward` with the reference's values in the trained tensors, then puts the policy's
  // back (bit for bit). No gradient is recorded in between.
  void with_reference(const std::function<void()>& forward);

 private:
  void swap();  // exchanges the trained tensors' values with the held ones
  std::vector<at::Tensor> trained_, held_;
  bool done_ = false;
};

}  // namespace titan::train
