// The trainer's view of the distributed room: where this process sits (torchrun's
// environment), the world and its groups, and the data-parallel wrapper of the model when the
// data-parallel degree is above one. One process gets groups of one and no wrapper, and runs
// the same code.
#pragma once

#include <memory>

#include "titan/config/trainer_config.h"
#include "titan/distributed/data_parallel.h"
#include "titan/distributed/launch_env.h"
#include "titan/distributed/parallel_dims.h"
#include "titan/distributed/world.h"
#include "titan/train/precision.h"

namespace titan::train {

struct DistributedSetup {
  distributed::LaunchEnv env;
  std::unique_ptr<distributed::World> world;
  distributed::ParallelDims dims;
  distributed::DataParallelGroups groups;
  std::unique_ptr<distributed::DataParallel> data_parallel;  // null when dp_size() == 1

  int64_t rank() const { return env.rank; }
  int64_t dp_rank() const { return groups.dp_rank; }
  int64_t dp_size() const { return dims.dp_size(); }
  // Sums over the data-parallel ranks, in place (nothing on one process).
  void all_reduce_dp(at::Tensor& tensor) const { groups.dp->all_reduce(tensor); }
};

// The launch environment and the parallel layout, checked against each other before anything
// else is built (a bad layout fails fast, naming the degrees and the world size).
DistributedSetup check_distributed_layout(const config::TrainerConfig& cfg);

// Joins the other ranks (rendezvous), checks that they resolved the same config, and makes
// the groups and the data-parallel wrapper for `precision`'s device (NCCL on CUDA, Gloo on the
// CPU), with the comm.* timeouts.
void connect(DistributedSetup& setup, const config::TrainerConfig& cfg, const Precision& precision,
             const std::string& config_text);

}  // namespace titan::train
