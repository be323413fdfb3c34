// World: this process's place among all the ranks of a job. It makes the rendezvous store from
// torchrun's environment (the agent's store, or one rank 0 hosts), the process groups (Gloo on
// the CPU, NCCL on CUDA), and keeps a heartbeat in the store so that a failed collective can
// say which rank stopped. A single process has no store and groups of one.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "titan/distributed/group.h"
#include "titan/distributed/launch_env.h"

namespace titan::distributed {

struct WorldOptions {
  bool cuda = false;  // NCCL on the device `device_index`, else Gloo on the CPU
  int64_t device_index = 0;
  std::chrono::milliseconds init_timeout{std::chrono::seconds(300)};   // rendezvous, set-up
  std::chrono::milliseconds train_timeout{std::chrono::seconds(100)};  // every later collective
};

class World {
 public:
  // Rendezvous: returns once every rank has joined (or throws after init_timeout).
  World(const LaunchEnv& env, const WorldOptions& options);
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  int64_t rank() const { return env_.rank; }
  int64_t size() const { return env_.world_size; }
  const LaunchEnv& env() const { return env_; }

  const std::shared_ptr<Group>& world_group() const { return world_; }
  // The group of `ranks` (global, ascending, this rank among them); every member calls this
  // with the same name and ranks, in the same order relative to other new_group calls. With
  // `cpu` the group runs Gloo on CPU tensors even when the job runs NCCL (the data loader's
  // exchanges of token ids).
  std::shared_ptr<Group> new_group(const std::string& name, const std::vector<int64_t>& ranks,
                                   bool cpu = false);

  // From here on every group uses the train timeout (the first steps used the init timeout).
  void use_train_timeout();

  // The store every rank shares (single process: a local map). Blocking get.
  void store_set(const std::string& key, const std::string& value);
  std::string store_get(const std::string& key);
  int64_t store_add(const std::string& key, int64_t amount);
  // Waits for `key` by polling (the store is not held while waiting, so a background thread may
  // wait while others use it), up to the init timeout; then returns its value.
  std::string store_wait_and_get(const std::string& key);

 private:
  struct State;
  LaunchEnv env_;
  WorldOptions options_;
  std::unique_ptr<State> state_;
  std::shared_ptr<Group> world_;
  std::vector<std::weak_ptr<Group>> groups_;
};

// Checks through the store that every rank resolved the same config (a hash of its text);
// throws naming the first rank that differs from rank 0.
void check_same_config_on_every_rank(World& world, const std::string& config_text);

}  // namespace titan::distributed
