// A kernel library built against an older registration ABI: its entry points are written out
// by hand (as an old plugin_api.h would have generated them) and report version 0. titan must
// refuse it without calling its register function.
#include <cstdint>
#include <cstdio>
#include <cstdlib>

extern "C" uint32_t titan_kernel_abi_version() { return 0; }
extern "C" const char* titan_kernel_torch_version() { return "0.0.0"; }
extern "C" void titan_register_kernels(void*) {
  std::fprintf(stderr, "stale_abi_kernels: register function called\n");
  std::abort();
}
