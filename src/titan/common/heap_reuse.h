// Keeps the blocks a training step frees for the next step's allocations.
//
// ATen's CPU tensors come from malloc. glibc serves a block above its mmap threshold (128 KiB
// to 32 MiB, adjusted at run time) with a fresh mapping and unmaps it when freed, and gives the
// top of its heap back to the kernel beyond a trim threshold; every step then asks the kernel
// again for pages that it zero-fills on first touch. For the debug model's step (a 155 MB
// embedding gradient and a 155 MB head gradient made anew each step) that is ~40 ms per
// buffer. With both thresholds raised, those buffers are carved from the heap and reused, as
// PyTorch's CUDA caching allocator reuses device memory; the process keeps its peak heap.
// So it is called once the model is built and loaded (titan train, titan eval), not at start-up:
// a load frees much (a layer at full precision before QLoRA quantises it, a shard's conversion
// buffers), and with raised thresholds that would stay resident for the whole run.
#pragma once

namespace titan {

// Raises glibc's mmap and trim thresholds to 1 GiB, unless the environment already sets them
// (MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_ or GLIBC_TUNABLES). Returns whether it did.
// A no-op elsewhere than glibc.
bool keep_freed_blocks_for_reuse();

}  // namespace titan
