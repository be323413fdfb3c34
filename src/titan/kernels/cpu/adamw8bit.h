// The fused CPU AdamW8bit step (kernels/adamw8bit.h gives the arithmetic): at::parallel_for
// over the quantisation blocks, each thread taking chunks of kAdamW8bitChunkBlocks blocks in
// passes over data that stays in its L1 cache: (1) dequantise both states, update them in
// float32 and take each block's new absmax; (2) the square roots of the second moments, MKL's
// (what ATen's float32 sqrt and so bitsandbytes' v.sqrt() call: not correctly rounded, so
// taken to the bit as it does, mkl_sqrt.h); (3) update and write the parameter and quantise
// both states. On AVX-512 (2) and (3) are one loop with each root computed in registers;
// elsewhere, or where MKL's result is not reproduced, vsSqrt is called per chunk. The passes
// reach DRAM in bursts, so each asks in advance for its lines two blocks ahead. Blocks are
// independent, so the result does not depend on the number of threads.
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
