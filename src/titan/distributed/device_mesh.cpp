#include "titan/distributed/device_mesh.h"

#include "titan/common/error.h"
#include "titan/common/strings.h"

namespace titan::distributed {

DeviceMesh::DeviceMesh(World& world, const ParallelDims& dims)
    : layout_(dims), rank_(world.rank()) {
  TITAN_CHECK(dims.world_size == world.size(), "mesh of ", dims.world_size,
              " ranks for a world of ", world.size());
  std::map<std::vector<int64_t>, std::shared_ptr<Group>> by_members;
  by_members[layout_.members("world", rank_)] = world.world_group();
  // All groups of every name, in the same order on every rank; each rank joins those that
  // hold it (their rendezvous involves their members only).
  for (const std::string& name : MeshLayout::group_names()) {
    for (const std::vector<int64_t>& members : layout_.all_groups(name)) {
      if (std::find(members.begin(), members.end(), rank_) == members.end()) continue;
      auto& shared = by_members[members];
      if (!shared) shared = world.new_group(name + std::to_string(members.front()), members);
      groups_[name] = shared;
    }
  }
  // The ranks that pack the same token stream: the data-parallel ranks and the cp ranks of each
  // (which keep the same rows, each its part of the sequence).
  const std::vector<int64_t> readers = layout_.members("dp_cp", rank_);
  groups_["data"] =
      world.new_group("data" + std::to_string(readers.front()), readers, /*cpu=*/true);
}

DeviceMesh::DeviceMesh(const ParallelDims& dims) : layout_(dims) {
  TITAN_CHECK(dims.world_size == 1, "a mesh of ", dims.world_size,
              " ranks needs the world (DeviceMesh(World&, ...))");
  for (const std::string& name : MeshLayout::group_names()) groups_[name] = Group::solo(name);
  groups_["data"] = Group::solo("data");
}

const std::shared_ptr<Group>& DeviceMesh::group(const std::string& name) const {
  auto it = groups_.find(name);
  if (it == groups_.end()) {
    std::vector<std::string> names;
    for (const auto& [known, _] : groups_) names.push_back(known);
    fail("device mesh: no group named '", name, "'; the groups are ", join(names));
  }
  return it->second;
}

}  // namespace titan::distributed
