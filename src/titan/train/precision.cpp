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

at::Device resolve_device(const std::string& device) {
  if (device == "cpu") return at::kCPU;
  if (device == "cuda") {
    TITAN_CHECK(at::hasCUDA(), "training.device is cuda but no CUDA device is available (this ",
                "build or machine has none)");
    return at::Device(at::kCUDA, 0);
  }
  config::check_one_of("training.device", device, {"auto", "cpu", "cuda"});
  return at::hasCUDA() ? at::Device(at::kCUDA, 0) : at::Device(at::kCPU);
}

Precision resolve_precision(const config::TrainingConfig& training) {
  Precision p;
  p.device = resolve_device(training.device);
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
