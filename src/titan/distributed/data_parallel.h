// Data parallelism over the device mesh (device_mesh.h), applied to a model's modules as
// wrappers through the ParallelContext (models/parallel_context.h), the way torchtitan applies
// FSDP2 / DDP / HSDP:
//
//   FSDP (dp_shard > 1): every parameter of a unit is placed Shard(0) over dp_shard (over
//     dp_shard_cp, dp_shard x cp, under context parallelism, whose ranks each compute a part of
//     every gradient: torchtitan folds cp into FSDP the same way), on top of
//     whatever placement it had (parameter_placements.h): its local tensor is split on dim 0,
//     evenly with zero padding. The shard, in the parameter dtype (float32 master weights), is
//     what the module's slot holds between forwards and what the optimizer updates. Before the
//     unit's forward its parameters are all-gathered in the compute dtype into the slots (the
//     next unit's all-gather is started at once, to overlap); after it they are freed when the
//     unit reshards after forward, and gathered again when its backward starts. When its
//     backward is done, its gradients are reduce-scattered (summed, in the reduce dtype) into
//     the shards' gradients, asynchronously.
//   DDP (dp_replicate > 1, dp_shard 1): parameters stay whole (Replicate over dp_replicate); a
//     unit's gradients are all-reduced (summed) as soon as its backward is done, on the last
//     micro-batch of a step.
//   HSDP: both; the shards' gradients are then summed over dp_replicate.
//
// Gradients are summed, not averaged: the trainer divides the loss by the global number of
// valid tokens. After every backward call finish_backward(); it reduces what the hooks did not
// reach (units whose inputs need no gradient, such as the embedding), waits for every
// collective and frees every gathered parameter.
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "titan/distributed/device_mesh.h"
#include "titan/distributed/parameter_placements.h"
#include "titan/models/module.h"
#include "titan/models/parallel_context.h"

namespace titan::distributed {

struct DataParallelOptions {
  at::ScalarType param_dtype = at::kFloat;   // what parameters are all-gathered in (compute)
  at::ScalarType reduce_dtype = at::kFloat;  // what gradients are summed in
};

class DataParallel {
 public:
  // Records the placements it gives parameters in `placements`; both must outlive it.
  DataParallel(const DeviceMesh& mesh, ParameterPlacements& placements,
               DataParallelOptions options);
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  // See models::ParallelContext::fully_shard.
  void wrap(const std::vector<models::Module*>& modules, const models::ShardOptions& options);

  // Whether the gradients of the coming backward are the last of the step (gradient
  // accumulation: only then are they summed over the replicate group).
  void set_gradient_sync(bool sync) { sync_ = sync; }
  void finish_backward();
  // After forwards without a backward (validation): frees every gathered parameter, which the
  // units that keep theirs until their backward (the last block, the head) still hold, so that
  // the slots hold the shards again (what checkpoints and exports read).
  void finish_forward_only();

  // Whether any parameter is sharded (FSDP or HSDP).
  bool sharded() const;

 private:
  struct Param;
  struct Batch;
  struct Unit;
  void pre_forward(Unit& unit);
  void post_forward(Unit& unit);
  void pre_backward(Unit& unit);
  void post_backward(Unit& unit);
  void start_gather(Unit& unit);
  void finish_gather(Unit& unit);
  void reshard(Unit& unit);
  void reduce(Unit& unit);
  Unit* neighbour(const Unit& unit, int step) const;

  const DeviceMesh& mesh_;
  std::shared_ptr<Group> replicate_;  // dp_replicate: gradients are all-reduced over it
  ParameterPlacements& placements_;
  DataParallelOptions options_;
  bool sync_ = true;
  std::vector<std::unique_ptr<Unit>> units_;
  std::vector<Unit*> forward_order_;  // as the first step ran them
  std::map<std::string, std::pair<Unit*, size_t>> by_name_;
};

}  // namespace titan::distributed
