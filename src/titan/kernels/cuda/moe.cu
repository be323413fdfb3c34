// The data movement around the MoE grouped GEMMs: gathering each token's copies into expert
// order, and the weighted combine back to tokens (with its backward). One block per row or
// token; float32 accumulation; every sum in a fixed order (no atomics).
#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include "titan/kernels/cuda/block_reduce.cuh"
#include "titan/kernels/cuda/launchers.h"

namespace titan::kernels::cuda {
namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void gather_kernel(const T* x, const int64_t* index, T* out, int64_t hidden) {
  const int64_t row = blockIdx.x;
  const T* src = x + index[row] * hidden;
  T* dst = out + row * hidden;
  for (int64_t j = threadIdx.x; j < hidden; j += blockDim.x) dst[j] = src[j];
}

template <typename T>
__global__ void combine_kernel(const T* y, const T* w, const int64_t* row_of_slot, T* out,
                               int64_t top_k, int64_t hidden) {
  const int64_t t = blockIdx.x;
  for (int64_t j = threadIdx.x; j < hidden; j += blockDim.x) {
    float acc = 0.f;
    for (int64_t s = 0; s < top_k; ++s) {
      const float weight = w != nullptr ? static_cast<float>(w[t * top_k + s]) : 1.f;
      acc += weight * static_cast<float>(y[row_of_slot[t * top_k + s] * hidden + j]);
    }
    out[t * hidden + j] = static_cast<T>(acc);
  }
}

// One block per (token, slot) pair.
template <typename T>
__global__ void combine_backward_kernel(const T* g, const T* y, const T* w,
                                        const int64_t* row_of_slot, T* dy, T* dw, int64_t top_k,
                                        int64_t hidden) {
  const int64_t pair = blockIdx.x, t = pair / top_k;
  const int64_t row = row_of_slot[pair];
  const float weight = static_cast<float>(w[pair]);
  float dot = 0.f;
  for (int64_t j = threadIdx.x; j < hidden; j += blockDim.x) {
    const float gj = static_cast<float>(g[t * hidden + j]);
    dot += gj * static_cast<float>(y[row * hidden + j]);
    dy[row * hidden + j] = static_cast<T>(weight * gj);
  }
  dot = block_sum(dot);
  if (threadIdx.x == 0) dw[pair] = static_cast<T>(dot);
}

}  // namespace

void gather_rows(const at::Tensor& x, const at::Tensor& index, at::Tensor& out) {
  const int64_t rows = index.numel();
  if (rows == 0) return;
  // The tensors' device, not whichever is current (rank r trains on cuda:r).
  const c10::cuda::CUDAGuard guard(x.device());
  auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kBFloat16, at::kHalf, x.scalar_type(), "gather_rows_cuda", [&] {
        gather_kernel<scalar_t><<<rows, kThreads, 0, stream>>>(x.const_data_ptr<scalar_t>(),
                                                               index.const_data_ptr<int64_t>(),
                                                               out.data_ptr<scalar_t>(), x.size(1));
      });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

void combine_rows(const at::Tensor& y, const at::Tensor& w, const at::Tensor& row_of_slot,
                  int64_t top_k, at::Tensor& out) {
  const int64_t tokens = out.size(0);
  if (tokens == 0) return;
  // The tensors' device, not whichever is current (rank r trains on cuda:r).
  const c10::cuda::CUDAGuard guard(y.device());
  auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kBFloat16, at::kHalf, y.scalar_type(), "combine_rows_cuda", [&] {
        combine_kernel<scalar_t><<<tokens, kThreads, 0, stream>>>(
            y.const_data_ptr<scalar_t>(), w.defined() ? w.const_data_ptr<scalar_t>() : nullptr,
            row_of_slot.const_data_ptr<int64_t>(), out.data_ptr<scalar_t>(), top_k, out.size(1));
      });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

void combine_rows_backward(const at::Tensor& g, const at::Tensor& y, const at::Tensor& w,
                           const at::Tensor& row_of_slot, at::Tensor& dy, at::Tensor& dw) {
  const int64_t pairs = w.numel();
  if (pairs == 0) return;
  // The tensors' device, not whichever is current (rank r trains on cuda:r).
  const c10::cuda::CUDAGuard guard(y.device());
  auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kBFloat16, at::kHalf, y.scalar_type(), "combine_rows_cuda_bwd", [&] {
        combine_backward_kernel<scalar_t><<<pairs, kThreads, 0, stream>>>(
            g.const_data_ptr<scalar_t>(), y.const_data_ptr<scalar_t>(),
            w.const_data_ptr<scalar_t>(), row_of_slot.const_data_ptr<int64_t>(),
            dy.data_ptr<scalar_t>(), dw.data_ptr<scalar_t>(), w.size(1), g.size(1));
      });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace titan::kernels::cuda
