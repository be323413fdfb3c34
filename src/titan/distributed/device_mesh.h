// DeviceMesh: the process groups of a ParallelDims layout, by name (torchtitan's world mesh and
// its sub-meshes): world, pp, dp_replicate, dp_shard, dp, cp, tp, ep, efsdp, dp_cp,
// dp_shard_cp (parallel_dims.h says which ranks each holds), plus "data", a CPU group over the
// same ranks as dp_cp (every rank that packs the same token stream) for the data loader's
// exchanges, which run on its own thread and so must not share a group with training.
//
// Built collectively: every rank creates the groups that hold it, in one fixed order. A group
// of one is the identity (group.h), so one process runs the same code. Groups with the same
// members share one backend.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "titan/distributed/group.h"
#include "titan/distributed/parallel_dims.h"
#include "titan/distributed/world.h"

namespace titan::distributed {

class DeviceMesh {
 public:
  // Every rank of the world calls this with the same dims, in the same order relative to other
  // group creation.
  DeviceMesh(World& world, const ParallelDims& dims);
  // One process: every group is this process alone.
  explicit DeviceMesh(const ParallelDims& dims);

  const ParallelDims& dims() const { return layout_.dims(); }
  const MeshLayout& layout() const { return layout_; }
  int64_t rank() const { return rank_; }
  // The group `name` that holds this rank; throws naming the known groups.
  const std::shared_ptr<Group>& group(const std::string& name) const;
  Group& operator[](const std::string& name) const { return *group(name); }
  // This rank's place on a mesh dimension, and its size.
  int64_t coordinate(const std::string& name) const { return group(name)->rank(); }
  int64_t size(const std::string& name) const { return group(name)->size(); }

 private:
  MeshLayout layout_;
  int64_t rank_ = 0;
  std::map<std::string, std::shared_ptr<Group>> groups_;
};

}  // namespace titan::distributed
