// ParallelDims: how the world is laid out for data parallelism (torchtitan's ParallelDims),
// and the process groups of that layout.
//
// Ranks form a [replicate, shard] mesh, row-major: rank = replicate_index * shard + shard_index.
// The shard group (FSDP) is a row, the replicate group (DDP, or HSDP's outer dimension) a
// column, and the data-parallel group is every rank. Tensor, pipeline, context and expert
// parallelism are not built yet: a degree > 1 is a clear error.
#pragma once

#include <memory>

#include "titan/config/trainer_config.h"
#include "titan/distributed/world.h"

namespace titan::distributed {

struct ParallelDims {
  int64_t replicate = 1;
  int64_t shard = 1;
  int64_t world_size = 1;

  int64_t dp_size() const { return replicate * shard; }
  bool data_parallel() const { return dp_size() > 1; }
};

// Resolves data_parallel_shard_degree -1 and checks the degrees against the world size; throws
// naming the degrees for a product that is not the world size or an unsupported degree > 1.
ParallelDims make_parallel_dims(const config::ParallelismConfig& config, int64_t world_size);

struct DataParallelGroups {
  std::shared_ptr<Group> dp;         // every data-parallel rank
  std::shared_ptr<Group> shard;      // this rank's row: parameters are sharded over it
  std::shared_ptr<Group> replicate;  // this rank's column: gradients are all-reduced over it
  int64_t dp_rank = 0;               // this rank's index in dp (which rows of a batch it takes)
};

// Creates the groups of `dims` on every rank (collective over the world).
DataParallelGroups make_data_parallel_groups(World& world, const ParallelDims& dims);

}  // namespace titan::distributed
