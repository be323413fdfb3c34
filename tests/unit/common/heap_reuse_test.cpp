// keep_freed_blocks_for_reuse raises glibc's thresholds unless the user set them: then a
// large block comes from the heap (reused when freed), not from a mapping of its own.
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "titan/common/heap_reuse.h"

namespace titan {
namespace {

#if defined(__GLIBC__)
TEST(HeapReuse, LeavesThresholdsTheUserSet) {
  ::setenv("MALLOC_TRIM_THRESHOLD_", "131072", 1);
  EXPECT_FALSE(keep_freed_blocks_for_reuse());
  ::unsetenv("MALLOC_TRIM_THRESHOLD_");
}

TEST(HeapReuse, ALargeBlockComesFromTheHeap) {
  ASSERT_TRUE(keep_freed_blocks_for_reuse());
  constexpr size_t kBytes = size_t{64} << 20;  // above glibc's largest default mmap threshold
  const size_t mapped_before = mallinfo2().hblks;
  void* block = std::malloc(kBytes);
  ASSERT_NE(block, nullptr);
  EXPECT_EQ(mallinfo2().hblks, mapped_before);  // no mapping of its own
  std::free(block);
}
#endif

}  // namespace
}  // namespace titan
