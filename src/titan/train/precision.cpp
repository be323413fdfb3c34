#include "titan/train/precision.h"

#include "titan/common/error.h"
#include "titan/config/validate.h"

namespace titan::train {

at::ScalarType dtype_from_name(const std::string& name, const std::string& key) {
  config::check_one_of(key, name, {"float32", "bfloat16", "float16"});
  if (name == "bfloat16") return at::kBFloat16;
  if (name == "float16") return at::kHalf;
  return at::kFloat;
}

at::Device resolve_device(const std::string& device, int64_t local_rank) {
  config::check_one_of("training.device", device, {"auto", "cpu", "cuda"});
  if (device == "cpu" || (device == "auto" && !at::hasCUDA())) return at::kCPU;
  TITAN_CHECK(at::hasCUDA(), "training.device is cuda but no CUDA device is available (this ",
              "build or machine has none)");
  const int64_t count = static_cast<int64_t>(at::getNumGPUs());
  TITAN_CHECK(count > 0, "training.device is cuda but no GPU is visible");
  return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(local_rank % count));
}

Precision resolve_precision(const config::TrainingConfig& training, int64_t local_rank) {
  Precision p;
  p.device = resolve_device(training.device, local_rank);
  p.param_dtype = dtype_from_name(training.dtype, "training.dtype");
  if (training.mixed_precision_param == "auto")
    p.compute_dtype = p.device.is_cuda() ? at::kBFloat16 : at::kFloat;
  else
    p.compute_dtype =
        dtype_from_name(training.mixed_precision_param, "training.mixed_precision_param");
  if (p.param_dtype == at::kBFloat16) p.compute_dtype = at::kBFloat16;  // pure bf16 training
  return p;
}

}  // namespace titan::train
