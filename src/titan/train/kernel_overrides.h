// The kernel overrides of a job: loads override.libraries into the kernel registry, then makes
// the resolver of override.imports for the device and compute dtype the job trains with.
// `titan train` and `titan configs --print` both start from here.
#pragma once

#include "titan/config/trainer_config.h"
#include "titan/kernels/override_resolver.h"
#include "titan/train/precision.h"

namespace titan::train {

kernels::OverrideResolver make_override_resolver(const config::TrainerConfig& cfg,
                                                 const Precision& precision);

}  // namespace titan::train
