// The inside of Group, shared by the files of this room that create groups (world.cpp and the
// backend factories). Not for use outside the distributed room: it includes c10d.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <chrono>
#include <functional>

#include "titan/distributed/group.h"

namespace titan::distributed {

struct Group::Impl {
  std::string name;
  std::vector<int64_t> global_ranks;
  int64_t rank = 0;
  c10::intrusive_ptr<c10d::Backend> backend;  // null for a group of one
  // What a point-to-point wait allows (set_timeout changes it with the collectives'); 0: the
  // backend's own.
  std::chrono::milliseconds timeout{0};
  // Describes which ranks stopped answering (from the store's heartbeats), for error messages;
  // may be empty.
  std::function<std::string()> diagnose;
};

}  // namespace titan::distributed
