// The interface through which a model spec's parallelize step applies data parallelism to its
// modules without knowing the distributed room (which implements it: FSDP, DDP, HSDP).
#pragma once

#include <vector>

#include "titan/models/module.h"

namespace titan::models {

class DataParallelWrapper {
 public:
  virtual ~DataParallelWrapper() = default;

  // Makes `modules` (in forward order) one unit: FSDP shards their parameters together,
  // all-gathers them before the first of them runs and frees them again after its forward when
  // `reshard_after_forward` (and after backward in any case); DDP all-reduces their gradients
  // together as soon as their backward is done. Call once per unit, in forward order, after
  // activation checkpointing (the data-parallel wrapper then sits outside it).
  virtual void wrap(const std::vector<Module*>& modules, bool reshard_after_forward) = 0;
};

}  // namespace titan::models
