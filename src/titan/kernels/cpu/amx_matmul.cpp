#include "titan/kernels/cpu/amx_matmul.h"

#ifdef TITAN_AMX_KERNELS
#include <ATen/Parallel.h>
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace titan::kernels::cpu::amx {
namespace {

bool usable() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  const bool amx_bf16 = (d >> 22) & 1, amx_tile = (d >> 24) & 1;
  if (!__get_cpuid_count(7, 1, &a, &b, &c, &d)) return false;
  const bool avx512_bf16 = (a >> 5) & 1;
  if (!amx_bf16 || !amx_tile || !avx512_bf16 || !nf4_avx512::cpu_has_avx512()) return false;
  // Linux hands out the tile registers' state only to processes that ask (ARCH_REQ_XCOMP_PERM
  // for XFEATURE_XTILEDATA); the grant covers every thread of the process.
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}

}  // namespace

bool available() {
  static const bool ok = usable();
  return ok;
}

void pack_transposed(const uint16_t* x, int64_t m_rows, int64_t k, int64_t m_blocks,
                     uint16_t* out) {
  const int64_t kc_count = k / 32;
  at::parallel_for(0, m_blocks * kc_count, 64, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t)
      pack_transposed_tile(x, m_rows, k, t / kc_count, t % kc_count, out + t * kTileValues);
  });
}

}  // namespace titan::kernels::cpu::amx
#endif
