// One block per row of a chunk's logits: an online max/sum pass for logsumexp and the row's
// loss, then (when gradients are wanted) a second pass that overwrites the logits with
// softmax - one_hot(label) in their own dtype. The logits are never widened to float32 in
// memory. A label outside [0, vocab) that is not ignore_index trips a device assertion
// (reference's gather raises an error for it too).
#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include "titan/kernels/cuda/block_reduce.cuh"
#include "titan/kernels/cuda/launchers.h"

namespace titan::kernels::cuda {
namespace {

constexpr int kThreads = 512;

template <typename T>
__global__ void cross_entropy_kernel(T* logits, const int64_t* labels, int64_t ignore_index,
                                     bool write_grad, float* loss, int64_t vocab) {
  const int64_t row = blockIdx.x;
  T* lr = logits + row * vocab;
  const int64_t label = labels[row];
  const bool valid = label != ignore_index;
  CUDA_KERNEL_ASSERT(!valid || (label >= 0 && label < vocab));
  MaxSum acc{-INFINITY, 0.f};
  for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x)
    acc = merge(acc, MaxSum{static_cast<float>(lr[j]), 1.f});
  acc = block_max_sum(acc);
  const float lse = acc.max + logf(acc.sum);
  if (threadIdx.x == 0)
    loss[row] = valid && label >= 0 && label < vocab ? lse - static_cast<float>(lr[label]) : 0.f;
  if (!write_grad) return;
  __syncthreads();  // lr[label] is read above before it is overwritten below
  for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) {
    const float p = valid ? expf(static_cast<float>(lr[j]) - lse) - (j == label ? 1.f : 0.f) : 0.f;
    lr[j] = static_cast<T>(p);
  }
}

}  // namespace

void cross_entropy_rows(at::Tensor& logits, const at::Tensor& labels, int64_t ignore_index,
                        bool write_grad, at::Tensor& loss) {
  const int64_t rows = logits.size(0);
  if (rows == 0) return;
  // The tensors' device, not whichever is current (rank r trains on cuda:r).
  const c10::cuda::CUDAGuard guard(logits.device());
  auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kBFloat16, at::kHalf, logits.scalar_type(), "cross_entropy_cuda", [&] {
        cross_entropy_kernel<scalar_t><<<rows, kThreads, 0, stream>>>(
            logits.data_ptr<scalar_t>(), labels.const_data_ptr<int64_t>(), ignore_index, write_grad,
            loss.data_ptr<float>(), logits.size(1));
      });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace titan::kernels::cuda
