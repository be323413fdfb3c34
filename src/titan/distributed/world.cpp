#include "titan/distributed/world.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef USE_C10D_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "titan/common/error.h"
#include "titan/common/strings.h"
#include "titan/config/field_values.h"
#include "titan/distributed/group_impl.h"
#include "titan/distributed/nccl_backend.h"

namespace titan::distributed {
namespace {

constexpr const char* kHeartbeatKey = "titan/heartbeat/";
constexpr auto kHeartbeatPeriod = std::chrono::milliseconds(500);

std::string key_for_rank(int64_t rank) { return kHeartbeatKey + std::to_string(rank); }

bool is_loopback(const std::string& host) {
  return host == "localhost" || host == "127.0.0.1" || host == "::1";
}

}  // namespace

struct World::State {
  c10::intrusive_ptr<c10d::Store> store;  // null for one process
  std::map<std::string, std::string> local_store;
  // The heartbeat: this rank increments its counter in the store every kHeartbeatPeriod.
  std::thread heartbeat;
  std::mutex mutex;
  std::condition_variable stop_signal;
  bool stopping = false;
};

World::World(const LaunchEnv& env, const WorldOptions& options)
    : env_(env), options_(options), state_(std::make_unique<State>()) {
  if (!env_.multi_process()) {
    world_ = Group::solo("world");
    return;
  }
  // torch's env:// rendezvous: the agent's store when torchrun says so, else rank 0 hosts one.
  c10d::TCPStoreOptions store_options;
  store_options.port = static_cast<uint16_t>(env_.master_port);
  store_options.timeout = options_.init_timeout;
  store_options.numWorkers = static_cast<size_t>(env_.world_size);
  store_options.waitWorkers = false;
  try {
    if (env_.agent_store) {
      store_options.isServer = false;
      auto tcp = c10::make_intrusive<c10d::TCPStore>(env_.master_addr, store_options);
      state_->store =
          c10::make_intrusive<c10d::PrefixStore>("/worker/attempt_" + env_.restart_count, tcp);
    } else {
      store_options.isServer = env_.rank == 0;
      store_options.multiTenant = true;
      state_->store = c10::make_intrusive<c10d::TCPStore>(env_.master_addr, store_options);
    }
  } catch (const std::exception& e) {
    fail("rendezvous with ", env_.master_addr, ":", env_.master_port, " failed for rank ",
         env_.rank, " of ", env_.world_size, " within comm.init_timeout_seconds: ", e.what());
  }
  state_->store->add(key_for_rank(env_.rank), 1);
  state_->heartbeat = std::thread([this] {
    std::unique_lock<std::mutex> lock(state_->mutex);
    while (!state_->stop_signal.wait_for(lock, kHeartbeatPeriod,
                                         [this] { return state_->stopping; })) {
      try {
        state_->store->add(key_for_rank(env_.rank), 1);
      } catch (...) {
        return;  // the store is gone (the agent stopped): nothing left to report to
      }
    }
  });
  std::vector<int64_t> everyone;
  for (int64_t r = 0; r < env_.world_size; ++r) everyone.push_back(r);
  world_ = new_group("world", everyone);
}

World::~World() {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->stopping = true;
  }
  state_->stop_signal.notify_all();
  if (state_->heartbeat.joinable()) state_->heartbeat.join();
  world_.reset();
}

std::shared_ptr<Group> World::new_group(const std::string& name, const std::vector<int64_t>& ranks,
                                        bool cpu) {
  auto position = std::find(ranks.begin(), ranks.end(), env_.rank);
  TITAN_CHECK(position != ranks.end(), "rank ", env_.rank, " is not a member of group ", name);
  if (ranks.size() == 1) {
    auto solo = Group::solo(name);
    return solo;
  }
  auto impl = std::make_unique<Group::Impl>();
  impl->name = name;
  impl->global_ranks = ranks;
  impl->rank = position - ranks.begin();
  impl->timeout = options_.init_timeout;
  const int size = static_cast<int>(ranks.size());
  auto prefixed = c10::make_intrusive<c10d::PrefixStore>("titan/group/" + name, state_->store);
  if (options_.cuda && !cpu) {
    impl->backend = make_nccl_backend(prefixed, static_cast<int>(impl->rank), size,
                                      options_.device_index, options_.init_timeout);
  } else {
#ifdef USE_C10D_GLOO
    auto gloo = c10d::ProcessGroupGloo::Options::create(options_.init_timeout);
    // Loopback when every rank is on this machine; otherwise the interface GLOO_SOCKET_IFNAME
    // names, or the one this host's name resolves to (what torch does).
    const char* interface = std::getenv("GLOO_SOCKET_IFNAME");
    if (interface != nullptr && *interface != '\0') {
      gloo->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(interface));
    } else if (is_loopback(env_.master_addr) && env_.local_world_size == env_.world_size) {
      gloo->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
    } else {
      gloo->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
    }
    try {
      impl->backend = c10::make_intrusive<c10d::ProcessGroupGloo>(
          prefixed, static_cast<int>(impl->rank), size, gloo);
    } catch (const std::exception& e) {
      fail("creating the Gloo process group ", name, " failed on rank ", env_.rank, ": ", e.what());
    }
#else
    fail("this build has no Gloo (the gloo headers were missing at build time): multi-process ",
         "training on the CPU is not available");
#endif
  }
  // A failed collective asks the store which ranks stopped beating.
  c10::intrusive_ptr<c10d::Store> store = state_->store;
  const std::vector<int64_t> members = ranks;
  impl->diagnose = [store, members]() -> std::string {
    try {
      std::vector<int64_t> before;
      for (int64_t r : members) before.push_back(store->add(key_for_rank(r), 0));
      std::this_thread::sleep_for(4 * kHeartbeatPeriod);
      std::vector<std::string> stopped;
      for (size_t i = 0; i < members.size(); ++i) {
        if (store->add(key_for_rank(members[i]), 0) == before[i])
          stopped.push_back(std::to_string(members[i]));
      }
      if (stopped.empty()) return "";
      return (stopped.size() == 1 ? "rank " : "ranks ") + join(stopped) +
             " stopped responding (no heartbeat in the store)";
    } catch (...) {
      return "the rendezvous store is gone (the launcher may have stopped the job)";
    }
  };
  auto group = std::make_shared<Group>(std::move(impl));
  groups_.push_back(group);
  return group;
}

void World::use_train_timeout() {
  for (auto& weak : groups_)
    if (auto group = weak.lock()) group->set_timeout(options_.train_timeout);
}

void World::store_set(const std::string& key, const std::string& value) {
  if (!state_->store) {
    state_->local_store[key] = value;
    return;
  }
  state_->store->set(key, std::vector<uint8_t>(value.begin(), value.end()));
}

std::string World::store_get(const std::string& key) {
  if (!state_->store) {
    auto it = state_->local_store.find(key);
    TITAN_CHECK(it != state_->local_store.end(), "store key ", key, " was never set");
    return it->second;
  }
  try {
    const std::vector<uint8_t> value = state_->store->get(key);
    return std::string(value.begin(), value.end());
  } catch (const std::exception& e) {
    fail("waiting for '", key, "' in the rendezvous store failed on rank ", env_.rank, ": ",
         e.what());
  }
}

int64_t World::store_add(const std::string& key, int64_t amount) {
  if (!state_->store) {
    int64_t value = 0;
    auto it = state_->local_store.find(key);
    if (it != state_->local_store.end()) config::parse_int64(it->second, value);
    state_->local_store[key] = std::to_string(value + amount);
    return value + amount;
  }
  return state_->store->add(key, amount);
}

std::string World::store_wait_and_get(const std::string& key) {
  if (!state_->store) return store_get(key);
  const auto deadline = std::chrono::steady_clock::now() + options_.init_timeout;
  while (true) {
    bool present = false;
    try {
      present = state_->store->check({key});
    } catch (const std::exception& e) {
      fail("waiting for '", key, "' in the rendezvous store failed on rank ", env_.rank, ": ",
           e.what());
    }
    if (present) return store_get(key);
    TITAN_CHECK(std::chrono::steady_clock::now() < deadline, "rank ", env_.rank,
                " waited comm.init_timeout_seconds for '", key,
                "' in the rendezvous store: another rank did not get there");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void check_same_config_on_every_rank(World& world, const std::string& config_text) {
  if (world.size() == 1) return;
  // FNV-1a: stable, and enough to tell two configs apart.
  uint64_t hash = 1469598103934665603ull;
  for (unsigned char c : config_text) hash = (hash ^ c) * 1099511628211ull;
  std::ostringstream hex;
  hex << std::hex << hash;
  world.store_set("titan/config_hash/" + std::to_string(world.rank()), hex.str());
  const std::string reference = world.store_get("titan/config_hash/0");
  for (int64_t r = 1; r < world.size(); ++r) {
    const std::string other = world.store_get("titan/config_hash/" + std::to_string(r));
    TITAN_CHECK(other == reference, "rank ", r, " resolved a different config than rank 0 ",
                "(config hash ", other, " vs ", reference,
                "): start every rank with the same command line and config files");
  }
}

}  // namespace titan::distributed
