#include "titan/train/kernel_overrides.h"

namespace titan::train {

kernels::OverrideResolver make_override_resolver(const config::TrainerConfig& cfg,
                                                 const Precision& precision) {
  for (const std::string& library : cfg.overrides.libraries)
    kernels::kernel_registry().load_library(library);
  kernels::OverrideSettings settings;
  settings.imports = cfg.overrides.imports;
  settings.fallback = cfg.overrides.fallback;
  settings.device = precision.device.type();
  settings.dtype = precision.compute_dtype;
  return kernels::OverrideResolver(settings);
}

}  // namespace titan::train
