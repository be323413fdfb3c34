// RMSNorm kernels: one block per row forward (statistics + output) and backward (dx), and a
// column kernel for the weight gradient's per-block partial sums (summed in order by the
// caller, so the result does not depend on scheduling). Math in float32; the normalised value
// is rounded to x's dtype before the weight multiply, as in reference.
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
__global__ void forward_kernel(const T* x, const T* w, T* y, float* inv_rms, int64_t dim,
                               float eps) {
  const int64_t row = blockIdx.x;
  const T* xr = x + row * dim;
  float sum = 0.f;
  for (int64_t j = threadIdx.x; j < dim; j += blockDim.x) {
    const float v = static_cast<float>(xr[j]);
    sum += v * v;
  }
  sum = block_sum(sum);
  const float inv = rsqrtf(sum / static_cast<float>(dim) + eps);
  if (threadIdx.x == 0) inv_rms[row] = inv;
  T* yr = y + row * dim;
  for (int64_t j = threadIdx.x; j < dim; j += blockDim.x) {
    const T normed = static_cast<T>(static_cast<float>(xr[j]) * inv);
    yr[j] = static_cast<T>(static_cast<float>(w[j]) * static_cast<float>(normed));
  }
}

template <typename T>
__global__ void backward_dx_kernel(const T* dy, const T* x, const T* w, const float* inv_rms, T* dx,
                                   int64_t dim) {
  const int64_t row = blockIdx.x;
  const T* xr = x + row * dim;
  const T* dyr = dy + row * dim;
  const float inv = inv_rms[row];
  float dot = 0.f;
  for (int64_t j = threadIdx.x; j < dim; j += blockDim.x)
    dot += static_cast<float>(dyr[j]) * static_cast<float>(w[j]) * static_cast<float>(xr[j]) * inv;
  const float mean_dot = block_sum(dot) / static_cast<float>(dim);
  T* dxr = dx + row * dim;
  for (int64_t j = threadIdx.x; j < dim; j += blockDim.x) {
    const float n = static_cast<float>(xr[j]) * inv;
    dxr[j] = static_cast<T>(inv *
                            (static_cast<float>(dyr[j]) * static_cast<float>(w[j]) - n * mean_dot));
  }
}

template <typename T>
__global__ void backward_dw_kernel(const T* dy, const T* x, const float* inv_rms, float* dw_blocks,
                                   int64_t rows, int64_t dim) {
  // Row blocks on grid.x (up to 2^31 - 1 of them; grid.y stops at 65535), columns on grid.y.
  const int64_t j = blockIdx.y * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (j >= dim) return;
  const int64_t begin = blockIdx.x * kRmsNormRowsPerBlock;
  const int64_t end = min(rows, begin + kRmsNormRowsPerBlock);
  float acc = 0.f;
  for (int64_t r = begin; r < end; ++r) {
    const T normed = static_cast<T>(static_cast<float>(x[r * dim + j]) * inv_rms[r]);
    acc += static_cast<float>(dy[r * dim + j]) * static_cast<float>(normed);
  }
  dw_blocks[blockIdx.x * dim + j] = acc;
}

}  // namespace

void rms_norm_forward(const at::Tensor& x, const at::Tensor& w, double eps, at::Tensor& y,
                      at::Tensor& inv_rms) {
  const int64_t rows = inv_rms.numel(), dim = x.size(-1);
  if (rows == 0) return;
  // The tensors' device, not whichever is current (rank r trains on cuda:r).
  const c10::cuda::CUDAGuard guard(x.device());
  auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "rms_norm_cuda", [&] {
    forward_kernel<scalar_t><<<rows, kThreads, 0, stream>>>(
        x.const_data_ptr<scalar_t>(), w.const_data_ptr<scalar_t>(), y.data_ptr<scalar_t>(),
        inv_rms.data_ptr<float>(), dim, static_cast<float>(eps));
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

void rms_norm_backward(const at::Tensor& dy, const at::Tensor& x, const at::Tensor& w,
                       const at::Tensor& inv_rms, at::Tensor& dx, at::Tensor& dw_blocks) {
  const int64_t rows = inv_rms.numel(), dim = x.size(-1);
  if (rows == 0) return;
  // The tensors' device, not whichever is current (rank r trains on cuda:r).
  const c10::cuda::CUDAGuard guard(x.device());
  auto stream = at::cuda::getCurrentCUDAStream();
  TORCH_CHECK((dim + kThreads - 1) / kThreads <= 65535, "rms_norm (cuda): dimension ", dim,
              " too large");
  const dim3 dw_grid(dw_blocks.size(0), (dim + kThreads - 1) / kThreads);
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kBFloat16, at::kHalf, x.scalar_type(), "rms_norm_cuda_bwd", [&] {
        backward_dx_kernel<scalar_t><<<rows, kThreads, 0, stream>>>(
            dy.const_data_ptr<scalar_t>(), x.const_data_ptr<scalar_t>(),
            w.const_data_ptr<scalar_t>(), inv_rms.const_data_ptr<float>(), dx.data_ptr<scalar_t>(),
            dim);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
        backward_dw_kernel<scalar_t><<<dw_grid, kThreads, 0, stream>>>(
            dy.const_data_ptr<scalar_t>(), x.const_data_ptr<scalar_t>(),
            inv_rms.const_data_ptr<float>(), dw_blocks.data_ptr<float>(), rows, dim);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
      });
}

}  // namespace titan::kernels::cuda
