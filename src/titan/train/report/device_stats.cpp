#include "titan/train/report/device_stats.h"

#ifdef TITAN_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <cuda_runtime_api.h>
#endif

namespace titan::train {

#ifdef TITAN_WITH_CUDA
DeviceMemory cuda_memory(int device_index) {
  auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device_index);
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, device_index);
  using Stat = c10::CachingAllocator::StatType;
  DeviceMemory m;
  m.peak_bytes = double(stats.allocated_bytes[static_cast<size_t>(Stat::AGGREGATE)].peak);
  m.peak_reserved_bytes = double(stats.reserved_bytes[static_cast<size_t>(Stat::AGGREGATE)].peak);
  m.total_bytes = double(prop.totalGlobalMem);
  m.num_alloc_retries = stats.num_alloc_retries;
  m.num_ooms = stats.num_ooms;
  return m;
}
void reset_cuda_peak_memory(int device_index) {
  c10::cuda::CUDACachingAllocator::resetPeakStats(device_index);
}
std::string cuda_device_name(int device_index) {
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, device_index);
  return prop.name;
}
double cuda_free_bytes(int device_index) {
  size_t free_bytes = 0, total_bytes = 0;
  cudaSetDevice(device_index);
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) return 0;
  return static_cast<double>(free_bytes);
}
#else
double cuda_free_bytes(int) { return 0; }
DeviceMemory cuda_memory(int) { return {}; }
void reset_cuda_peak_memory(int) {}
std::string cuda_device_name(int) { return ""; }
#endif

}  // namespace titan::train
