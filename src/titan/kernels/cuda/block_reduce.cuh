// Block-wide reductions for the kernels of this folder (one value per thread -> the block's
// total, returned to every thread). Blocks are at most 1024 threads, a multiple of 32.
#pragma once

#include <cuda_runtime.h>

namespace titan::kernels::cuda {

__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float block_sum(float v) {
  __shared__ float partial[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = warp_sum(v);
  __syncthreads();  // `partial` may still be read by a previous call
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + 31) / 32;
  v = threadIdx.x < warps ? partial[threadIdx.x] : 0.f;
  if (warp == 0) v = warp_sum(v);
  if (threadIdx.x == 0) partial[0] = v;
  __syncthreads();
  return partial[0];
}

// An online softmax accumulator: the running maximum and the sum of exp(x - max).
struct MaxSum {
  float max;
  float sum;
};

__device__ __forceinline__ MaxSum merge(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.max, b.max);
  if (m == -INFINITY) return {m, 0.f};
  return {m, a.sum * expf(a.max - m) + b.sum * expf(b.max - m)};
}

__device__ __forceinline__ MaxSum block_max_sum(MaxSum v) {
  __shared__ float maxes[32];
  __shared__ float sums[32];
  for (int offset = 16; offset > 0; offset /= 2) {
    MaxSum other{__shfl_xor_sync(0xffffffffu, v.max, offset),
                 __shfl_xor_sync(0xffffffffu, v.sum, offset)};
    v = merge(v, other);
  }
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();
  if (lane == 0) {
    maxes[warp] = v.max;
    sums[warp] = v.sum;
  }
  __syncthreads();
  const int warps = (blockDim.x + 31) / 32;
  if (warp == 0) {
    v = threadIdx.x < warps ? MaxSum{maxes[threadIdx.x], sums[threadIdx.x]}
                            : MaxSum{-INFINITY, 0.f};
    for (int offset = 16; offset > 0; offset /= 2) {
      MaxSum other{__shfl_xor_sync(0xffffffffu, v.max, offset),
                   __shfl_xor_sync(0xffffffffu, v.sum, offset)};
      v = merge(v, other);
    }
    if (threadIdx.x == 0) {
      maxes[0] = v.max;
      sums[0] = v.sum;
    }
  }
  __syncthreads();
  return {maxes[0], sums[0]};
}

}  // namespace titan::kernels::cuda
