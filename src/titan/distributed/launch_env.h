// Where this process sits in a launch: torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_USE_AGENT_STORE,
// TORCHELASTIC_RESTART_COUNT), or a single process when titan runs without torchrun.
#pragma once

#include <cstdint>
#include <string>

namespace titan::distributed {

struct LaunchEnv {
  int64_t rank = 0;
  int64_t world_size = 1;
  int64_t local_rank = 0;
  int64_t local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int64_t master_port = 29500;
  // torchrun's agent hosts the store (every worker is a client); otherwise rank 0 hosts it.
  bool agent_store = false;
  std::string restart_count = "0";

  bool multi_process() const { return world_size > 1; }
};

// Reads the environment; a variable with an impossible value is a titan::Error naming it.
LaunchEnv launch_env_from_environment();

}  // namespace titan::distributed
