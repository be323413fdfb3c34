// Where and in which dtypes training runs, from training.device / dtype /
// mixed_precision_param (docs/architecture.md section 3: "auto" computes in bfloat16 on CUDA and in
// float32 on the CPU; training.dtype is what the optimizer updates).
#pragma once

#include <ATen/ATen.h>

#include <string>

#include "titan/config/trainer_config.h"

namespace titan::train {

struct Precision {
  at::Device device = at::kCPU;
  at::ScalarType param_dtype = at::kFloat;
  at::ScalarType compute_dtype = at::kFloat;
};

// `local_rank` picks the GPU of this process on a machine with several (torchrun's LOCAL_RANK).
Precision resolve_precision(const config::TrainingConfig& training, int64_t local_rank = 0);
at::Device resolve_device(const std::string& device, int64_t local_rank = 0);  // auto|cpu|cuda
at::ScalarType dtype_from_name(const std::string& name, const std::string& key);

}  // namespace titan::train
