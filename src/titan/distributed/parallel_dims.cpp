#include "titan/distributed/parallel_dims.h"

#include "titan/common/error.h"
#include "titan/config/validate.h"

namespace titan::distributed {

ParallelDims make_parallel_dims(const config::ParallelismConfig& p, int64_t world_size) {
  config::check_parallel_degrees(p, world_size);
  auto unsupported = [](const char* key, int64_t degree) {
    TITAN_CHECK(degree == 1, "parallelism.", key, " = ", degree,
                ": only data parallelism (data_parallel_replicate_degree, "
                "data_parallel_shard_degree) is built so far; set it to 1");
  };
  unsupported("tensor_parallel_degree", p.tensor_parallel_degree);
  unsupported("pipeline_parallel_degree", p.pipeline_parallel_degree);
  unsupported("context_parallel_degree", p.context_parallel_degree);
  unsupported("expert_parallel_degree", p.expert_parallel_degree);
  ParallelDims dims;
  dims.world_size = world_size;
  dims.replicate = p.data_parallel_replicate_degree;
  dims.shard = config::resolved_data_parallel_shard_degree(p, world_size);
  return dims;
}

DataParallelGroups make_data_parallel_groups(World& world, const ParallelDims& dims) {
  DataParallelGroups g;
  const int64_t rank = world.rank();
  const int64_t row = rank / dims.shard, column = rank % dims.shard;
  g.dp = world.world_group();
  g.dp_rank = rank;
  // Every rank creates the groups in the same order: all rows, then all columns, so that the
  // store keys of a group are written by exactly its members.
  for (int64_t r = 0; r < dims.replicate; ++r) {
    std::vector<int64_t> members;
    for (int64_t c = 0; c < dims.shard; ++c) members.push_back(r * dims.shard + c);
    if (r == row) g.shard = world.new_group("shard" + std::to_string(r), members);
  }
  for (int64_t c = 0; c < dims.shard; ++c) {
    std::vector<int64_t> members;
    for (int64_t r = 0; r < dims.replicate; ++r) members.push_back(r * dims.shard + c);
    if (c == column) g.replicate = world.new_group("replicate" + std::to_string(c), members);
  }
  return g;
}

}  // namespace titan::distributed
