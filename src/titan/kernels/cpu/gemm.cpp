#include "titan/kernels/cpu/gemm.h"

#include <ATen/Context.h>
#include <ATen/record_function.h>
#include <c10/util/Exception.h>

// ATen's oneDNN matmul: result = beta * result + alpha * (mat1 @ mat2) on dense tensors of any
// strides (ATen/native/mkldnn/Matmul.h, which the torch wheel does not ship; the function is
// exported from libtorch_cpu). Without a reduced-precision setting
// (torch.backends.mkldnn.matmul.fp32_precision, left at its default "none") float32 is
// computed in float32. With beta == 0 the result is not read.
namespace at::native {
TORCH_API void mkldnn_matmul(const at::Tensor& mat1, const at::Tensor& mat2,
                             const at::Tensor& result, float beta, float alpha);
}  // namespace at::native

namespace titan::kernels::cpu {
namespace {

bool unit_stride(const at::Tensor& m) {
  return m.stride(0) == 1 || m.stride(1) == 1 || m.size(0) == 1 || m.size(1) == 1;
}

bool rows_contiguous(const at::Tensor& m) { return m.stride(1) == 1 || m.size(1) == 1; }

// Below this many multiply-adds oneDNN's fixed cost per call (~15 us here: primitive lookup and
// set-up) exceeds what its faster kernels save: [1, 256] x [256, 256] takes 5 us in MKL and
// 20 us in oneDNN, [1, 256] x [256, 2048] 43 and 35 us.
constexpr int64_t kSmallProduct = int64_t{1} << 18;

bool small(const at::Tensor& a, const at::Tensor& b) {
  return a.size(0) * a.size(1) * b.size(1) < kSmallProduct;
}

}  // namespace

bool gemm_uses_onednn() { return at::hasMKLDNN(); }

bool gemm_runs_on_onednn(const at::Tensor& a, const at::Tensor& b, const at::Tensor& out) {
  // ATen takes: an empty inner dimension, small products, dtypes other than float32 (ATen
  // sends bfloat16 to oneDNN itself) and layouts oneDNN's fast kernels do not take: an output
  // whose rows are not contiguous (a transposed one runs oneDNN's reference loop, hundreds of
  // times slower) and an operand with no unit stride.
  return a.scalar_type() == at::kFloat && a.size(1) > 0 && !small(a, b) && gemm_uses_onednn() &&
         rows_contiguous(out) && unit_stride(a) && unit_stride(b);
}

void gemm_out(const at::Tensor& a, const at::Tensor& b, const at::Tensor& out, bool accumulate) {
  TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && out.dim() == 2 && a.size(1) == b.size(0) &&
                  out.size(0) == a.size(0) && out.size(1) == b.size(1),
              "gemm: [M, K] @ [K, N] -> [M, N] expected, got ", a.sizes(), " @ ", b.sizes(), " -> ",
              out.sizes());
  TORCH_CHECK(a.is_cpu() && b.is_cpu() && out.is_cpu(), "gemm: CPU tensors expected");
  TORCH_CHECK(a.scalar_type() == b.scalar_type() && a.scalar_type() == out.scalar_type(),
              "gemm: one dtype expected, got ", a.scalar_type(), ", ", b.scalar_type(), " -> ",
              out.scalar_type());
  if (out.numel() == 0) return;
  if (!gemm_runs_on_onednn(a, b, out)) {
    if (accumulate)
      out.addmm_(a, b);
    else
      at::mm_out(const_cast<at::Tensor&>(out), a, b);
    return;
  }
  // Named for the profiler (profiling.* traces), as aten::mm is: oneDNN's matmul is not an op.
  RECORD_FUNCTION("titan::gemm", std::vector<c10::IValue>({a, b}));
  at::native::mkldnn_matmul(a, b, out, accumulate ? 1.0f : 0.0f, 1.0f);
}

at::Tensor gemm(const at::Tensor& a, const at::Tensor& b) {
  at::Tensor out = at::empty({a.size(0), b.size(1)}, a.options());
  gemm_out(a, b, out);
  return out;
}

}  // namespace titan::kernels::cpu
