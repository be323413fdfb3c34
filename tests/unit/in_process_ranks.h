// Ranks of a real distributed world inside one test process: one thread per rank, each with a
// World (a TCPStore on a free loopback port, hosted by rank 0, and Gloo groups), so that the
// pieces that collectives drive (the data-parallel wrapper, placements, checkpoints under a
// layout) are unit-tested without torchrun.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "titan/distributed/world.h"

namespace titan::testing {

// A loopback port nothing listens on now (the kernel's pick for a socket bound to port 0).
inline int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  socklen_t length = sizeof(address);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

// Runs fn(world) on `world_size` threads, one rank each; rethrows the first exception.
inline void run_ranks(int64_t world_size, const std::function<void(distributed::World&)>& fn) {
  const int port = free_port();
  std::exception_ptr failure;
  std::mutex mutex;
  std::vector<std::thread> threads;
  for (int64_t rank = 0; rank < world_size; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        distributed::LaunchEnv env;
        env.rank = rank;
        env.world_size = world_size;
        env.local_rank = rank;
        env.local_world_size = world_size;
        env.master_port = port;
        distributed::WorldOptions options;
        options.init_timeout = std::chrono::seconds(60);
        options.train_timeout = std::chrono::seconds(60);
        distributed::World world(env, options);
        fn(world);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!failure) failure = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace titan::testing
