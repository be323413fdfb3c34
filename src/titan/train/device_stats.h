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
};

DeviceMemory cuda_memory(int device_index);
void reset_cuda_peak_memory(int device_index);
std::string cuda_device_name(int device_index);

}  // namespace titan::train
