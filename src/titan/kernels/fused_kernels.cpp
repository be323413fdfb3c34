// The implementation "fused" of each op it exists for: the hand-written kernels of kernels/cpu
// and (in a CUDA build) kernels/cuda, behind one name per op so that one override.imports list
// serves both devices. Each call goes to the kernel of its tensors' device; which devices and
// dtypes an op's "fused" takes is its supports function, checked when a model is built.
#include "titan/kernels/fused_kernels.h"

#include "titan/kernels/cpu/cpu_kernels.h"
#include "titan/kernels/reference/reference.h"
#include "titan/kernels/registry.h"
#if TITAN_WITH_CUDA
#include "titan/kernels/cuda/cuda_kernels.h"
#endif

namespace titan::kernels {
namespace {

bool on_cuda(at::DeviceType device, at::ScalarType dtype) {
#if TITAN_WITH_CUDA
  return cuda::supports(device, dtype);
#else
  return false;
#endif
}

bool on_cpu_or_cuda(at::DeviceType device, at::ScalarType dtype) {
  return on_cuda(device, dtype) || cpu::supports(device, dtype);
}

[[noreturn]] void no_kernel(const char* op, const at::Tensor& t) {
  TORCH_CHECK(false, op, "=fused has no kernel for ", t.device(), " in this build");
}

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
#if TITAN_WITH_CUDA
  if (x.is_cuda()) return cuda::rms_norm(x, weight, eps);
#endif
  return cpu::rms_norm(x, weight, eps);
}

at::Tensor moe_experts(const at::Tensor& x, const Routing& routing, const at::Tensor& gate_up,
                       const at::Tensor& down) {
#if TITAN_WITH_CUDA
  if (x.is_cuda()) return cuda::moe_experts(x, routing, gate_up, down);
#endif
  return cpu::moe_experts(x, routing, gate_up, down);
}

RotatedQueryKey rope(const at::Tensor& q, const at::Tensor& k, const at::Tensor& cos,
                     const at::Tensor& sin) {
  // The CUDA kernel reads one [S, d] table for every row; rows with positions of their own
  // (packed documents, cos/sin [B, 1, S, d]) take the reference.
  if (cos.dim() != 2) return reference::rope(q, k, cos, sin);
#if TITAN_WITH_CUDA
  if (q.is_cuda()) return cuda::rope(q, k, cos, sin);
#endif
  no_kernel("rope", q);
}

at::Tensor swiglu(const at::Tensor& x, const at::Tensor& gate_proj, const at::Tensor& up_proj,
                  const at::Tensor& down_proj) {
#if TITAN_WITH_CUDA
  if (x.is_cuda()) return cuda::swiglu(x, gate_proj, up_proj, down_proj);
#endif
  no_kernel("swiglu", x);
}

at::Tensor cross_entropy(const at::Tensor& hidden, const at::Tensor& weight,
                         const at::Tensor& labels, int64_t ignore_index) {
#if TITAN_WITH_CUDA
  if (hidden.is_cuda()) return cuda::cross_entropy(hidden, weight, labels, ignore_index);
#endif
  return cpu::cross_entropy(hidden, weight, labels, ignore_index);
}

at::Tensor nf4_linear(const at::Tensor& x, const Nf4Weight& weight) {
#if TITAN_WITH_CUDA
  if (x.is_cuda()) return cuda::nf4_linear(x, weight);
#endif
  return cpu::nf4_linear(x, weight);
}

}  // namespace

void register_fused_kernels(KernelRegistry& registry) {
  auto add = [&](OpFunction fn, SupportsFn supports, const char* description,
                 SupportsFn default_where = nullptr) {
    registry.add({"fused", "built-in", description, fn, supports, default_where});
  };
  add(RmsNormFn{&rms_norm}, &on_cpu_or_cuda, "one pass per row, hand-written backward (CPU, CUDA)");
  add(MoeExpertsFn{&moe_experts}, &on_cpu_or_cuda,
      "counting sort + per-expert GEMMs with fused SwiGLU (CPU); gather/combine kernels around "
      "_grouped_mm (CUDA)");
  add(RopeFn{&rope}, &on_cuda, "q and k in one kernel each way (CUDA)");
  add(SwigluFn{&swiglu}, &on_cuda, "gate+up as one GEMM, fused activation kernel (CUDA)");
  // The default on the CPU: it trains the debug model's step (vocabulary 151936) about 1.5x
  // faster than reference's chunked logsumexp (bench/RESULTS.md).
  add(CrossEntropyFn{&cross_entropy}, &on_cpu_or_cuda,
      "chunked, logits turned into their gradient in place in the activations' dtype (CPU, "
      "CUDA)",
      &cpu::supports);
  // The default wherever it runs: at the speed of reference's one GEMM (a small weight is one
  // tile), it never holds more than a tile of the dequantised weight, where reference holds a
  // whole weight from the forward until its dequantised copy is freed.
  add(Nf4LinearFn{&nf4_linear}, &on_cpu_or_cuda,
      "tiles of rows dequantised into a reused buffer, one GEMM a tile (CPU, CUDA)",
      &on_cpu_or_cuda);
}

}  // namespace titan::kernels
