// The NCCL backend of a group, on the GPU this rank uses.
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include "titan/common/error.h"
#include "titan/distributed/nccl_backend.h"

namespace titan::distributed {

c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store,
                                                    int rank, int size, int64_t device_index,
                                                    std::chrono::milliseconds timeout) {
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  try {
    auto group = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, options);
    // Bind the communicator to this rank's GPU now, so the first collective does not guess.
    group->setBoundDeviceId(at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(device_index)));
    return group;
  } catch (const std::exception& e) {
    fail("creating the NCCL process group failed on GPU ", device_index, ": ", e.what());
  }
}

}  // namespace titan::distributed
