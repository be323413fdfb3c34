// The SwiGLU activation, a = silu(gate) * up over h = [gate | up], and its backward, one
// elementwise kernel each way (math in float32).
#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include "titan/kernels/cuda/launchers.h"

namespace titan::kernels::cuda {
namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void forward_kernel(const T* h, T* a, int64_t rows, int64_t inter) {
  const int64_t total = rows * inter;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / inter, j = i % inter;
    const float g = static_cast<float>(h[r * 2 * inter + j]);
    const float u = static_cast<float>(h[r * 2 * inter + inter + j]);
    a[i] = static_cast<T>(g / (1.f + expf(-g)) * u);
  }
}

template <typename T>
__global__ void backward_kernel(const T* h, const T* da, T* dh, int64_t rows, int64_t inter) {
  const int64_t total = rows * inter;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / inter, j = i % inter;
    const float g = static_cast<float>(h[r * 2 * inter + j]);
    const float u = static_cast<float>(h[r * 2 * inter + inter + j]);
    const float d = static_cast<float>(da[i]);
    const float sig = 1.f / (1.f + expf(-g));
    dh[r * 2 * inter + j] = static_cast<T>(d * u * sig * (1.f + g * (1.f - sig)));
    dh[r * 2 * inter + inter + j] = static_cast<T>(d * g * sig);
  }
}

int blocks_for(int64_t total) {
  return static_cast<int>(std::min<int64_t>((total + kThreads - 1) / kThreads, 65535));
}

}  // namespace

void silu_mul_forward(const at::Tensor& h, at::Tensor& a) {
  const int64_t rows = a.size(0), inter = a.size(1);
  if (rows * inter == 0) return;
  // The tensors' device, not whichever is current (rank r trains on cuda:r).
  const c10::cuda::CUDAGuard guard(h.device());
  auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, h.scalar_type(), "silu_mul_cuda", [&] {
    forward_kernel<scalar_t><<<blocks_for(rows * inter), kThreads, 0, stream>>>(
        h.const_data_ptr<scalar_t>(), a.data_ptr<scalar_t>(), rows, inter);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

void silu_mul_backward(const at::Tensor& h, const at::Tensor& da, at::Tensor& dh) {
  const int64_t rows = da.size(0), inter = da.size(1);
  if (rows * inter == 0) return;
  // The tensors' device, not whichever is current (rank r trains on cuda:r).
  const c10::cuda::CUDAGuard guard(h.device());
  auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kBFloat16, at::kHalf, h.scalar_type(), "silu_mul_cuda_bwd", [&] {
        backward_kernel<scalar_t><<<blocks_for(rows * inter), kThreads, 0, stream>>>(
            h.const_data_ptr<scalar_t>(), da.const_data_ptr<scalar_t>(), dh.data_ptr<scalar_t>(),
            rows, inter);
      });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace titan::kernels::cuda
