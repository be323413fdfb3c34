#include "titan/common/heap_reuse.h"

#include <cstdlib>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace titan {

bool keep_freed_blocks_for_reuse() {
#if defined(__GLIBC__)
  // Whoever set glibc's own knobs wanted those values.
  for (const char* name : {"MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES"})
    if (std::getenv(name) != nullptr) return false;
  constexpr int kThreshold = 1 << 30;
  return mallopt(M_MMAP_THRESHOLD, kThreshold) == 1 && mallopt(M_TRIM_THRESHOLD, kThreshold) == 1;
#else
  return false;
#endif
}

}  // namespace titan
