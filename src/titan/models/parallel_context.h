// ParallelContext: what a model spec's parallelize step (model_spec.h) may apply to a built
// model, as torchtitan's parallelize_fn applies fully_shard and friends from outside. The
// distributed room implements it over the device mesh (distributed/mesh_context.h); a model
// family's parallelize knows only this header, so models/ never includes distributed/.
//
// Mesh dimensions are named as in docs/distributed.md: "dp_replicate", "dp_shard", "dp",
// "cp", "tp", "pp", "ep", "efsdp". On one process every degree is 1 and every call is the
// identity.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "titan/models/module.h"

namespace titan::models {

struct ShardOptions {
  // FSDP frees the unit's gathered parameters after its forward (and gathers them again for
  // its backward); false keeps them until the backward (torchtitan's reshard_after_forward).
  bool reshard_after_forward = true;
};

class ParallelContext {
 public:
  virtual ~ParallelContext() = default;

  // Ranks on a mesh dimension, and this rank's place on it; throws naming an unknown one.
  virtual int64_t degree(const std::string& mesh_dim) const = 0;
  virtual int64_t coordinate(const std::string& mesh_dim) const = 0;
  // Whether data parallelism is on (dp_replicate x dp_shard > 1): fully_shard does something.
  virtual bool data_parallel() const = 0;

  // Makes `modules` (in forward order) one data-parallel unit: with dp_shard > 1 (FSDP) their
  // parameters are sharded together on dim 0 over dp_shard, all-gathered before the first of
  // them runs and freed again after its forward (when options say so) and after its backward,
  // and their gradients reduce-scattered; with dp_replicate > 1 (DDP, or HSDP's outer
  // dimension) their gradients are all-reduced over dp_replicate once the step's last backward
  // is done. Call once per unit, in forward order, after activation checkpointing (the
  // data-parallel wrapper then sits outside it). Nothing when data_parallel() is false.
  virtual void fully_shard(const std::vector<Module*>& modules, const ShardOptions& options) = 0;
};

}  // namespace titan::models
