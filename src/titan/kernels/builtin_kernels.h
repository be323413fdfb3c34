// Every implementation compiled into titan, registered once into the kernel registry when it
// is first used: `reference` for every op, and the kernels of kernels/cpu and kernels/cuda
// (the latter only in a CUDA build).
#pragma once

namespace titan::kernels {

class KernelRegistry;
void register_builtin_kernels(KernelRegistry& registry);

}  // namespace titan::kernels
