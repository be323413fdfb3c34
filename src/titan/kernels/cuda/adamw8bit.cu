// The fused AdamW8bit step on CUDA (kernels/adamw8bit.h gives the arithmetic, the CPU kernel
// the same in kernels/cpu/adamw8bit.cpp): one CUDA block per quantisation block of 256
// elements, one thread per element. Each thread dequantises its two states, updates them in
// float32, the block takes both new absmax values, then each thread writes its parameter and
// its two codes (the 65536-entry tables read through the cache). Every float operation is an
// explicit round-to-nearest intrinsic, so that nvcc contracts nothing the CPU does not fuse;
// the square root is IEEE (the CPU's comes from ATen, which may differ by an ulp).
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/util/BFloat16.h>

#include <map>
#include <mutex>

#include "titan/kernels/cuda/launchers.h"
#include "titan/kernels/dynamic_map.h"

namespace titan::kernels::cuda {
namespace {

constexpr int kThreads = 256;  // = kQuantBlock

struct Tables {
  at::Tensor map_m, map_v;      // float32 [256]
  at::Tensor table_m, table_v;  // uint8 [65536]
};

// The maps and tables on `device`, copied there once.
const Tables& tables_on(const at::Device& device) {
  static std::mutex mutex;
  static std::map<int, Tables> cache;
  const std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(device.index());
  if (it != cache.end()) return it->second;
  auto table = [&](bool is_signed) {
    const auto& t = quantize_table(is_signed);
    return at::from_blob(const_cast<uint8_t*>(t.data()), {65536}, at::kByte).to(device);
  };
  Tables t{dynamic_map(true).to(device), dynamic_map(false).to(device), table(true), table(false)};
  return cache.emplace(device.index(), std::move(t)).first->second;
}

__device__ __forceinline__ float block_max(float v) {
  __shared__ float partial[kThreads / 32];
  for (int offset = 16; offset > 0; offset /= 2)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();  // `partial` may still be read by a previous call
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  float top = 0.f;
  for (int w = 0; w < kThreads / 32; ++w) top = fmaxf(top, partial[w]);
  return top;
}

// quantize_grid_point (kernels/blockwise_8bit.h) on the device.
__device__ __forceinline__ uint32_t grid_point(float y) {
  y = y < -1.0f ? -1.0f : (1.0f < y ? 1.0f : y);
  const float t = __fmul_rn(__fadd_rn(y, 1.0f), 0.5f);
  return static_cast<uint32_t>(__float2int_rz(__fmaf_rn(t, 65535.0f, 0.5f))) & 0xFFFFu;
}

template <typename T>
__global__ void step_kernel(T* param, const T* grad, uint8_t* codes_m, float* absmax_m,
                            uint8_t* codes_v, float* absmax_v, const float* map_m,
                            const float* map_v, const uint8_t* table_m, const uint8_t* table_v,
                            int64_t n, AdamW8bitFloats s) {
  __shared__ float smap_m[256], smap_v[256];
  smap_m[threadIdx.x] = map_m[threadIdx.x];
  smap_v[threadIdx.x] = map_v[threadIdx.x];
  const int64_t block = blockIdx.x;
  const int64_t i = block * kThreads + threadIdx.x;
  const bool live = i < n;
  const float scale_m = absmax_m[block], scale_v = absmax_v[block];
  __syncthreads();
  float m = 0.f, v = 0.f;
  if (live) {
    const float g = static_cast<float>(grad[i]);
    m = __fmaf_rn(g, s.one_minus_beta1, __fmul_rn(__fmul_rn(smap_m[codes_m[i]], scale_m), s.beta1));
    v = __fmaf_rn(__fmul_rn(s.one_minus_beta2, g), g,
                  __fmul_rn(__fmul_rn(smap_v[codes_v[i]], scale_v), s.beta2));
  }
  const float top_m = block_max(fabsf(m));
  const float top_v = block_max(fabsf(v));
  if (live) {
    const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(v), s.bias_correction2_sqrt), s.eps);
    const float p = __fadd_rn(__fmul_rn(static_cast<float>(param[i]), s.decay),
                              __fdiv_rn(__fmul_rn(s.step_size, m), denom));
    param[i] = static_cast<T>(p);
    codes_m[i] =
        top_m == 0.f ? 0 : __ldg(&table_m[grid_point(__fmul_rn(m, __fdiv_rn(1.0f, top_m)))]);
    codes_v[i] =
        top_v == 0.f ? 0 : __ldg(&table_v[grid_point(__fmul_rn(v, __fdiv_rn(1.0f, top_v)))]);
  }
  if (threadIdx.x == 0) {
    absmax_m[block] = top_m;
    absmax_v[block] = top_v;
  }
}

}  // namespace

void adamw8bit_step(at::Tensor& param, const at::Tensor& grad, at::Tensor& codes_m,
                    at::Tensor& absmax_m, at::Tensor& codes_v, at::Tensor& absmax_v,
                    const AdamW8bitFloats& s) {
  const c10::cuda::CUDAGuard guard(param.device());
  const int64_t n = param.numel();
  if (n == 0) return;
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  const Tables& t = tables_on(param.device());
  auto stream = at::cuda::getCurrentCUDAStream();
  auto launch = [&](auto* p, const auto* g) {
    step_kernel<<<blocks, kThreads, 0, stream>>>(
        p, g, codes_m.data_ptr<uint8_t>(), absmax_m.data_ptr<float>(), codes_v.data_ptr<uint8_t>(),
        absmax_v.data_ptr<float>(), t.map_m.data_ptr<float>(), t.map_v.data_ptr<float>(),
        t.table_m.data_ptr<uint8_t>(), t.table_v.data_ptr<uint8_t>(), n, s);
  };
  if (param.scalar_type() == at::kFloat) {
    launch(param.data_ptr<float>(), grad.data_ptr<float>());
  } else {
    TORCH_CHECK(param.scalar_type() == at::kBFloat16,
                "AdamW8bit: parameters must be float32 or bfloat16");
    launch(param.data_ptr<c10::BFloat16>(), grad.data_ptr<c10::BFloat16>());
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace titan::kernels::cuda
