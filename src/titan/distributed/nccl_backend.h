// The NCCL backend of a group (CUDA builds only; cuda/nccl_backend.cpp). In a CPU build it
// throws a titan::Error saying that this build has no NCCL.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>

namespace titan::distributed {

c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store,
                                                    int rank, int size, int64_t device_index,
                                                    std::chrono::milliseconds timeout);

}  // namespace titan::distributed
