// NF4 dequantisation of a range of a weight's rows: one thread per element, its code value
// (bitsandbytes' NF4 table) times its block's absmax in float32, rounded to the output dtype.
#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include "titan/kernels/cuda/launchers.h"

namespace titan::kernels::cuda {
namespace {

constexpr int kThreads = 256;

// The 16 code values, passed by value to each launch (from kernels/nf4.cpp's table).
struct Nf4Table {
  float value[16];
};

template <typename T>
__global__ void dequantize_kernel(Nf4Table code, const uint8_t* packed, const float* absmax,
                                  int64_t first, int64_t count, int64_t blocksize, T* out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count) return;
  const int64_t e = first + i;
  const uint8_t byte = packed[e >> 1];
  const uint8_t index = (e & 1) ? (byte & 0x0F) : (byte >> 4);
  out[i] = static_cast<T>(code.value[index] * absmax[e / blocksize]);
}

}  // namespace

void nf4_dequantize_rows(const std::array<float, 16>& code, const at::Tensor& packed,
                         const at::Tensor& absmax, int64_t cols, int64_t blocksize, int64_t begin,
                         at::Tensor& out) {
  const c10::cuda::CUDAGuard guard(out.device());
  const int64_t count = out.numel();
  if (count == 0) return;
  const int64_t blocks = (count + kThreads - 1) / kThreads;
  auto stream = at::cuda::getCurrentCUDAStream();
  Nf4Table table;
  for (int i = 0; i < 16; ++i) table.value[i] = code[i];
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, out.scalar_type(), "nf4_dequantize",
                                  [&] {
                                    dequantize_kernel<scalar_t><<<blocks, kThreads, 0, stream>>>(
                                        table, packed.data_ptr<uint8_t>(), absmax.data_ptr<float>(),
                                        begin * cols, count, blocksize, out.data_ptr<scalar_t>());
                                  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace titan::kernels::cuda
