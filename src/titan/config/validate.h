// Value checks on a resolved config: enumerations, ranges and formats. Each failure throws
// titan::Error naming the key, the value and what is accepted. Checks that need the runtime
// (world size, which flavors or kernels exist) live with the code that knows it, except the
// parallelism product, which needs only the world size.
#pragma once

#include <cstdint>

#include "titan/config/trainer_config.h"

namespace titan::config {

// Throws at the first field whose value is out of range or not an accepted name.
void validate_config(const TrainerConfig& config);

// data_parallel_shard_degree after resolving -1 (whatever is left of the world size).
// Throws, naming the degrees and the world size, when they do not multiply to world_size.
int64_t resolved_data_parallel_shard_degree(const ParallelismConfig& parallelism,
                                            int64_t world_size);

// The product replicate x shard x context x tensor x pipeline must equal the world size
// (after resolving a shard degree of -1), and expert parallelism must divide the ranks it
// borrows from (shard x context x tensor), as in torchtitan.
void check_parallel_degrees(const ParallelismConfig& parallelism, int64_t world_size);

}  // namespace titan::config
