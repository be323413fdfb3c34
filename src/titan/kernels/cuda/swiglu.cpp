// The SwiGLU feed-forward on CUDA: one GEMM for gate and up together, the fused activation
// kernel (swiglu.cu) as an autograd function, then the down GEMM.
#include <torch/csrc/autograd/custom_function.h>

#include "titan/kernels/cuda/cuda_kernels.h"
#include "titan/kernels/cuda/launchers.h"
#include "titan/kernels/cuda/silu_mul.h"

namespace titan::kernels::cuda {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

class SiluMulFunction : public torch::autograd::Function<SiluMulFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& h_in) {
    const at::Tensor h = h_in.contiguous();
    at::Tensor a = at::empty({h.size(0), h.size(1) / 2}, h.options());
    silu_mul_forward(h, a);
    ctx->save_for_backward({h});
    return a;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const at::Tensor h = ctx->get_saved_variables()[0];
    const at::Tensor da = grad_outputs[0].to(h.scalar_type()).contiguous();
    at::Tensor dh = at::empty_like(h);
    silu_mul_backward(h, da, dh);
    return {dh};
  }
};

}  // namespace

at::Tensor silu_mul(const at::Tensor& h) {
  TORCH_CHECK(h.is_cuda() && h.dim() == 2 && h.size(1) % 2 == 0,
              "silu_mul (cuda): [N, 2I] on a CUDA device expected, got ", h.sizes());
  return SiluMulFunction::apply(h);
}

at::Tensor swiglu(const at::Tensor& x, const at::Tensor& gate_proj, const at::Tensor& up_proj,
                  const at::Tensor& down_proj) {
  const auto dtype = x.scalar_type();
  const at::Tensor gate_up = at::cat({gate_proj.to(dtype), up_proj.to(dtype)}, 0);  // [2I, H]
  const at::Tensor flat = x.reshape({-1, x.size(-1)});
  const at::Tensor a = silu_mul(at::matmul(flat, gate_up.t()));
  std::vector<int64_t> out_shape = x.sizes().vec();
  out_shape.back() = down_proj.size(0);
  return at::linear(a, down_proj.to(dtype)).view(out_shape);
}

}  // namespace titan::kernels::cuda
