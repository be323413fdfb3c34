// The built-in implementation "fused" (kernels/cpu, kernels/cuda); see fused_kernels.cpp.
#pragma once

namespace titan::kernels {

class KernelRegistry;
void register_fused_kernels(KernelRegistry& registry);

}  // namespace titan::kernels
