// The trainer's view of the distributed room: where this process sits (torchrun's
// environment), the world, and the parallel context (device mesh, parameter placements,
// data-parallel wrapper) built on it. One process gets a world of one, groups of one and no
// data-parallel wrapper, and runs the same code.
#pragma once

#include <memory>

#include "titan/config/trainer_config.h"
#include "titan/data/document_exchange.h"
#include "titan/distributed/launch_env.h"
#include "titan/distributed/mesh_context.h"
#include "titan/distributed/parallel_dims.h"
#include "titan/distributed/world.h"
#include "titan/train/precision.h"

namespace titan::train {

struct DistributedSetup {
  distributed::LaunchEnv env;
  distributed::ParallelDims dims;
  std::unique_ptr<distributed::World> world;

  int64_t rank() const { return env.rank; }
};

// The launch environment and the parallel layout, checked against each other before anything
// else is built (a bad layout fails fast, naming the degrees and the world size).
DistributedSetup check_distributed_layout(const config::TrainerConfig& cfg);

// Joins the other ranks (rendezvous) for `precision`'s device (NCCL on CUDA, Gloo on the
// CPU), with the comm.* timeouts, and checks that they resolved the same config.
void connect(DistributedSetup& setup, const config::TrainerConfig& cfg, const Precision& precision,
             const std::string& config_text);

// The device mesh of the layout (every group of it that holds this rank: a collective over the
// world) and the context the model spec's parallelize step receives, with the run's sequence
// split (its context-parallel shards).
std::unique_ptr<distributed::MeshContext> build_parallel_context(DistributedSetup& setup,
                                                                 const config::TrainerConfig& cfg,
                                                                 const Precision& precision);

// Every member's byte string, in rank order: a collective over `group`, whose tensors live on
// `device` (the CPU for Gloo, the rank's GPU for NCCL).
std::vector<std::string> all_gather_strings(distributed::Group& group, const std::string& mine,
                                            at::Device device = at::kCPU);

// The data loader's exchange among the data-parallel ranks, over the mesh's CPU group "data".
std::shared_ptr<data::DocumentExchange> document_exchange(const distributed::DeviceMesh& mesh);

}  // namespace titan::train
