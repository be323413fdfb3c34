// The fused CPU AdamW8bit step (kernels/adamw8bit.h gives the arithmetic): at::parallel_for
// over the quantisation blocks, each thread taking chunks of kAdamW8bitChunkBlocks blocks in
// three passes over data that stays in its L1 cache: (1) dequantise both states, update them in
// float32 and take each block's new absmax; (2) ATen's float32 sqrt of the chunk's second
// moments (the very function bitsandbytes calls, so the parameter is the same to the bit);
// (3) update and write the parameter and quantise both states. The passes reach DRAM in bursts,
// so each asks in advance for its lines two blocks ahead. Blocks are independent, so the result
// does not depend on the number of threads.
#pragma once

#include <ATen/ATen.h>

#include "titan/kernels/adamw8bit.h"

namespace titan::kernels::cpu {

// One block a chunk: as fast as 2 and faster than 4 or 8 (bench/optimizer_step_bench.cpp), its
// working set smallest; a thread takes at least kAdamW8bitGrainBlocks blocks.
inline constexpr int64_t kAdamW8bitChunkBlocks = 1;
inline constexpr int64_t kAdamW8bitGrainBlocks = 32;

// param float32 or bfloat16, contiguous; grad contiguous, of param's dtype; states checked by
// the caller (kernels/adamw8bit.cpp).
void adamw8bit_step(at::Tensor& param, const at::Tensor& grad, BlockwiseQuantized& exp_avg,
                    BlockwiseQuantized& exp_avg_sq, const AdamW8bitFloats& s);

}  // namespace titan::kernels::cpu
