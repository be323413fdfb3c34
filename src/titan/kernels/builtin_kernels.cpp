#include "titan/kernels/builtin_kernels.h"

#include "titan/kernels/fused_kernels.h"
#include "titan/kernels/reference/reference.h"
#include "titan/kernels/registry.h"

namespace titan::kernels {

void register_builtin_kernels(KernelRegistry& registry) {
  reference::register_reference_kernels(registry);
  register_fused_kernels(registry);
}

}  // namespace titan::kernels
