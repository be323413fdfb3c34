// Rotary embedding of q and k in one launch (half-split layout), and its transpose for the
// backward. For x = [x1 | x2] and cos = [c1 | c2], sin = [s1 | s2]:
//   forward  y1 = x1 c1 - x2 s1,  y2 = x2 c2 + x1 s2
//   inverse  y1 = x1 c1 + x2 s2,  y2 = x2 c2 - x1 s1   (the transposed rotation)
// Inputs may be strided views ([B, S, heads, d] transposed); outputs are contiguous.
#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include "titan/kernels/cuda/launchers.h"

namespace titan::kernels::cuda {
namespace {

constexpr int kThreads = 256;

template <typename T>
struct Operand {
  const T* in;
  T* out;
  int64_t heads, stride_b, stride_h, stride_s;
};

template <typename T>
__device__ void rotate_pair(const Operand<T>& op, int64_t row, int64_t j, int64_t seq, int64_t half,
                            const T* cos, const T* sin, bool inverse) {
  const int64_t s = row % seq;
  const int64_t h = (row / seq) % op.heads;
  const int64_t b = row / (seq * op.heads);
  const T* x = op.in + b * op.stride_b + h * op.stride_h + s * op.stride_s;
  T* y = op.out + row * 2 * half;
  const T* c = cos + s * 2 * half;
  const T* sn = sin + s * 2 * half;
  const float x1 = static_cast<float>(x[j]), x2 = static_cast<float>(x[j + half]);
  const float c1 = static_cast<float>(c[j]), c2 = static_cast<float>(c[j + half]);
  const float s1 = static_cast<float>(sn[j]), s2 = static_cast<float>(sn[j + half]);
  if (!inverse) {
    y[j] = static_cast<T>(x1 * c1 - x2 * s1);
    y[j + half] = static_cast<T>(x2 * c2 + x1 * s2);
  } else {
    y[j] = static_cast<T>(x1 * c1 + x2 * s2);
    y[j + half] = static_cast<T>(x2 * c2 - x1 * s1);
  }
}

template <typename T>
__global__ void rope_kernel(Operand<T> q, Operand<T> k, int64_t batch, int64_t seq, int64_t half,
                            const T* cos, const T* sin, bool inverse) {
  const int64_t q_pairs = batch * q.heads * seq * half;
  const int64_t total = q_pairs + batch * k.heads * seq * half;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    if (i < q_pairs)
      rotate_pair(q, i / half, i % half, seq, half, cos, sin, inverse);
    else
      rotate_pair(k, (i - q_pairs) / half, (i - q_pairs) % half, seq, half, cos, sin, inverse);
  }
}

template <typename T>
Operand<T> operand(const at::Tensor& in, at::Tensor& out) {
  return {in.const_data_ptr<T>(), out.data_ptr<T>(), in.size(1),
          in.stride(0),           in.stride(1),      in.stride(2)};
}

}  // namespace

void rope_apply(const at::Tensor& q, const at::Tensor& k, const at::Tensor& cos,
                const at::Tensor& sin, bool inverse, at::Tensor& q_out, at::Tensor& k_out) {
  const int64_t batch = q.size(0), seq = q.size(2), half = q.size(3) / 2;
  const int64_t total = batch * (q.size(1) + k.size(1)) * seq * half;
  if (total == 0) return;
  const int blocks = static_cast<int>(std::min<int64_t>((total + kThreads - 1) / kThreads, 65535));
  // The tensors' device, not whichever is current (rank r trains on cuda:r).
  const c10::cuda::CUDAGuard guard(q.device());
  auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, q.scalar_type(), "rope_cuda", [&] {
    rope_kernel<scalar_t><<<blocks, kThreads, 0, stream>>>(
        operand<scalar_t>(q, q_out), operand<scalar_t>(k, k_out), batch, seq, half,
        cos.const_data_ptr<scalar_t>(), sin.const_data_ptr<scalar_t>(), inverse);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace titan::kernels::cuda
