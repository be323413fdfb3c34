// The plugin API: how a shared library of kernels (`override.libraries`) registers its
// implementations of the overridable ops. Header-only, so a library links nothing of titan's,
// only libtorch (the same libtorch the titan binary uses).
//
//   #include "titan/kernels/plugin_api.h"
//   at::Tensor my_rms_norm(const at::Tensor& x, const at::Tensor& w, double eps) { ... }
//   bool on_cpu(at::DeviceType d, at::ScalarType) { return d == at::kCPU; }
//   TITAN_KERNEL_LIBRARY(registrar) {
//     registrar.add("mine", titan::kernels::RmsNormFn{&my_rms_norm}, &on_cpu, "my RMSNorm");
//   }
//
// then `--override.libraries libmine.so --override.imports rms_norm=mine@layers.1.*`.
// At load, titan checks the library's ABI version (kKernelAbiVersion) and the torch version it
// was compiled against, and refuses a mismatch with an error naming the library.
#pragma once

#include <torch/headeronly/version.h>

#include <cstdint>

#include "titan/kernels/ops.h"

namespace titan::kernels {

// Bumped whenever ops.h or KernelRegistrar changes in a way that breaks compiled libraries.
// 2: attention takes the document ids of packed rows; rope takes per-row cos/sin.
// 3: moe_dispatch and moe_combine (expert parallelism), ExpertGroup and DispatchedTokens.
// 4: nf4_linear (QLoRA's frozen NF4 weights) and Nf4Weight.
// 5: context_attention (context parallelism: local queries against the gathered sequence).
inline constexpr uint32_t kKernelAbiVersion = 5;

class KernelRegistrar {
 public:
  virtual ~KernelRegistrar() = default;
  // Registers implementation `name` of the op whose function type `fn` holds. `supports` says
  // on which devices and dtypes it runs (nullptr: everywhere). A name already registered for
  // that op is an error.
  virtual void add(const char* name, OpFunction fn, SupportsFn supports,
                   const char* description) = 0;
};

}  // namespace titan::kernels

// The C entry points titan looks up with dlsym.
#define TITAN_KERNEL_ABI_VERSION_SYMBOL "titan_kernel_abi_version"
#define TITAN_KERNEL_TORCH_VERSION_SYMBOL "titan_kernel_torch_version"
#define TITAN_REGISTER_KERNELS_SYMBOL "titan_register_kernels"

// Defines the entry points; the body that follows registers the library's implementations
// through `registrar` (a titan::kernels::KernelRegistrar&).
#define TITAN_KERNEL_LIBRARY(registrar)                                                          \
  static void titan_register_kernels_body(::titan::kernels::KernelRegistrar& registrar);         \
  extern "C" uint32_t titan_kernel_abi_version() { return ::titan::kernels::kKernelAbiVersion; } \
  extern "C" const char* titan_kernel_torch_version() { return TORCH_VERSION; }                  \
  extern "C" void titan_register_kernels(::titan::kernels::KernelRegistrar* r) {                 \
    titan_register_kernels_body(*r);                                                             \
  }                                                                                              \
  static void titan_register_kernels_body(::titan::kernels::KernelRegistrar& registrar)
