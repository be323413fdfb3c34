// ParallelDims: the degrees of every parallelism and how they lay the world out
// (torchtitan's ParallelDims). Torch-free: the mesh it describes is built into process groups by
// device_mesh.h.
//
// Ranks form a mesh of five dimensions, outermost first, row-major (tp varies fastest):
//   pp x dp_replicate x dp_shard x cp x tp
// Expert parallelism adds no ranks: its dimension "ep" borrows them from dp_shard x cp x tp
// (flattened in that order, as torchtitan does with expert tensor parallelism 1): the ep group
// is `ep` consecutive ranks of that flattening, and "efsdp" (the FSDP group of expert weights)
// is what is left of it, dp_shard x cp x tp / ep ranks. So experts are sharded over ep and then
// FSDP-sharded over efsdp, while dense weights are FSDP-sharded over dp_shard, or with context
// parallelism over dp_shard x cp (torchtitan folds cp into FSDP: the cp ranks hold the same
// weights and each computes its tokens' share of their gradients).
//
// The groups of this layout, by name (MeshLayout::group_names()):
//   world, pp, dp_replicate, dp_shard, dp (dp_replicate x dp_shard: the ranks that read
//   different batch rows), cp, tp, ep, efsdp, dp_cp (dp x cp: the ranks whose token counts
//   and losses make up a step's loss, torchtitan's "loss" mesh), dp_shard_cp (dp_shard x cp:
//   FSDP's shard group under context parallelism), stage (every dimension but pp: the ranks of
//   one pipeline stage, which hold the same layers).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "titan/config/trainer_config.h"

namespace titan::distributed {

struct ParallelDims {
  int64_t pp = 1;
  int64_t dp_replicate = 1;
  int64_t dp_shard = 1;
  int64_t cp = 1;
  int64_t tp = 1;
  int64_t ep = 1;
  int64_t world_size = 1;

  int64_t dp_size() const { return dp_replicate * dp_shard; }
  bool data_parallel() const { return dp_size() > 1; }
  // The ranks expert weights are FSDP-sharded over, once ep has taken its share.
  int64_t efsdp() const { return dp_shard * cp * tp / ep; }
  // {"pp": 1, "dp_replicate": 2, ...}: for the checkpoint manifest and the startup log.
  std::vector<std::pair<std::string, int64_t>> named() const;
};

// Reads the parallelism section against the world size: resolves data_parallel_shard_degree -1,
// then checks the product against the world size with one error naming every degree.
ParallelDims make_parallel_dims(const config::ParallelismConfig& config, int64_t world_size);

// Where each rank sits in the mesh of `dims`, and the members of each named group. Pure
// arithmetic over ranks: every rank computes the same answers.
class MeshLayout {
 public:
  explicit MeshLayout(const ParallelDims& dims);

  static const std::vector<std::string>& group_names();
  const ParallelDims& dims() const { return dims_; }
  // The global ranks of `group` that hold `rank`, ascending; throws naming an unknown group.
  std::vector<int64_t> members(const std::string& group, int64_t rank) const;
  // `rank`'s place among them (its coordinate on that dimension).
  int64_t index_in(const std::string& group, int64_t rank) const;
  int64_t size_of(const std::string& group) const;
  // Every distinct group of that name, each as its ascending ranks, in ascending order of their
  // first rank: the order in which every rank creates them.
  std::vector<std::vector<int64_t>> all_groups(const std::string& group) const;

 private:
  // The coordinates that stay fixed within a group of that name.
  std::vector<int64_t> key(const std::string& group, int64_t rank) const;
  ParallelDims dims_;
};

}  // namespace titan::distributed
