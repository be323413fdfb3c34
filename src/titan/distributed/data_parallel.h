// Data parallelism over the groups of parallel_dims.h, applied to a model's modules as
// wrappers (models/data_parallel.h), the way torchtitan applies FSDP2 / DDP / HSDP:
//
//   FSDP (shard group > 1): every parameter of a unit is sharded on dim 0 over the shard group
//     (RowShard); the shard, in the parameter dtype (float32 master weights), is what the
//     module's slot holds between forwards and what the optimizer updates. Before the unit's
//     forward its parameters are all-gathered in the compute dtype into the slots (the next
//     unit's all-gather is started at once, to overlap); after it they are freed when the unit
//     reshards after forward, and gathered again when its backward starts. When its backward is
//     done, its gradients are reduce-scattered (summed, in the reduce dtype) into the shards'
//     gradients, asynchronously.
//   DDP (replicate group > 1, shard group 1): parameters stay whole; a unit's gradients are
//     all-reduced (summed) as soon as its backward is done, on the last micro-batch of a step.
//   HSDP: both; the shards' gradients are then summed over the replicate group.
//
// Gradients are summed, not averaged: the trainer divides the loss by the global number of
// valid tokens. After every backward call finish_backward(); it reduces what the hooks did not
// reach (units whose inputs need no gradient, such as the embedding), waits for every
// collective and frees every gathered parameter.
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "titan/distributed/parallel_dims.h"
#include "titan/distributed/row_shard.h"
#include "titan/models/data_parallel.h"

namespace titan::distributed {

struct DataParallelOptions {
  at::ScalarType param_dtype = at::kFloat;   // what parameters are all-gathered in (compute)
  at::ScalarType reduce_dtype = at::kFloat;  // what gradients are summed in
};

class DataParallel : public models::DataParallelWrapper {
 public:
  DataParallel(DataParallelGroups groups, DataParallelOptions options);
  ~DataParallel() override;
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  void wrap(const std::vector<models::Module*>& modules, bool reshard_after_forward) override;

  // Whether the gradients of the coming backward are the last of the step (gradient
  // accumulation: only then are they summed over the replicate group).
  void set_gradient_sync(bool sync) { sync_ = sync; }
  void finish_backward();

  // Turns the local sum of squared gradient entries into the global one (over the shard group;
  // replicas hold equal gradients).
  void reduce_grad_norm_squares(at::Tensor& sum_of_squares) const;

  // Where a parameter (by name) lives: its full shape and the rows this rank holds; nullopt
  // for names this object does not manage.
  struct Layout {
    std::vector<int64_t> full_shape;
    RowShard rows;  // parts == 1: the whole tensor
    // Exactly one replica of each shard writes it to checkpoints.
    bool writer = true;
  };
  std::optional<Layout> layout(const std::string& name) const;
  // The full tensor of parameter `name` (or of a tensor laid out like it, e.g. its optimizer
  // state), gathered over the shard group: a collective, every rank calls it in the same order.
  at::Tensor gather_full(const std::string& name, const at::Tensor& local) const;

  const DataParallelGroups& groups() const { return groups_; }
  bool sharded() const { return groups_.shard->size() > 1; }

 private:
  struct Param;
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

  DataParallelGroups groups_;
  DataParallelOptions options_;
  bool sync_ = true;
  std::vector<std::unique_ptr<Unit>> units_;
  std::vector<Unit*> forward_order_;  // as the first step ran them
  std::map<std::string, std::pair<Unit*, size_t>> by_name_;
};

}  // namespace titan::distributed
