// make_nccl_backend for builds without CUDA (cuda/nccl_backend.cpp replaces it with TITAN_CUDA).
#ifndef TITAN_WITH_CUDA
#include "titan/common/error.h"
#include "titan/distributed/nccl_backend.h"

namespace titan::distributed {

c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>&, int,
                                                    int, int64_t, std::chrono::milliseconds) {
  fail(
      "this build has no CUDA, so no NCCL: train on the CPU (training.device cpu) or build with "
      "`make build-cuda`");
}

}  // namespace titan::distributed
#endif
