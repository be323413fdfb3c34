// Device facts the metrics need. Only device_stats.cpp touches CUDA headers, and only in a
// CUDA build (TITAN_WITH_CUDA); the CPU build answers with zeros.
#pragma once

#include <cstdint>
#include <string>

namespace titan::train {

struct DeviceMemory {
  double peak_bytes = 0;           // peak allocated by the caching allocator
  double peak_reserved_bytes = 0;  // peak reserved (allocated + cached) by it
  double total_bytes = 0;          // device memory
  int64_t num_alloc_retries = 0;   // cudaMalloc retries after freeing the cache
  int64_t num_ooms = 0;            // out-of-memory errors the allocator raised
};

DeviceMemory cuda_memory(int device_index);
void reset_cuda_peak_memory(int device_index);
std::string cuda_device_name(int device_index);
// The device's free memory in bytes (cudaMemGetInfo); 0 in a CPU build.
double cuda_free_bytes(int device_index);

}  // namespace titan::train
