#include "titan/kernels/linear.h"

#include <torch/csrc/autograd/custom_function.h>

#include "titan/kernels/cpu/amx_linear.h"
#include "titan/kernels/cpu/gemm.h"

namespace titan::kernels {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// y = x W^T with the GEMMs of cpu/gemm.h, the same three products at::linear's autograd runs:
// y = x W^T, dx = dy W, dW = dy^T x.
class CpuLinearFunction : public torch::autograd::Function<CpuLinearFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight) {
    ctx->save_for_backward({x, weight});
    const at::Tensor rows = x.reshape({-1, x.size(-1)});
    at::Tensor y = at::empty({rows.size(0), weight.size(0)}, x.options());
    cpu::gemm_out(rows, weight.t(), y);
    std::vector<int64_t> shape = x.sizes().vec();
    shape.back() = weight.size(0);
    return y.view(shape);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& x = saved[0];
    const at::Tensor& weight = saved[1];
    const at::Tensor dy = grad_outputs[0].reshape({-1, weight.size(0)});
    at::Tensor dx, dw;
    if (ctx->needs_input_grad(0)) dx = cpu::gemm(dy, weight).view(x.sizes());
    if (ctx->needs_input_grad(1)) dw = cpu::gemm(dy.t(), x.reshape({-1, x.size(-1)}));
    return {dx, dw};
  }
};

bool on_onednn(const at::Tensor& x, const at::Tensor& weight) {
  return x.is_cpu() && x.scalar_type() == at::kFloat && weight.scalar_type() == at::kFloat &&
         weight.dim() == 2 && x.dim() >= 1 && cpu::gemm_uses_onednn();
}

}  // namespace

at::Tensor linear(const at::Tensor& x, const at::Tensor& weight_in, const at::Tensor& bias_in) {
  const auto dt = x.scalar_type();
  const at::Tensor bias = bias_in.defined() ? bias_in.to(dt) : bias_in;
  // bfloat16 compute on float32 master weights: the AMX kernels round the weight to bfloat16
  // inside the product (no bfloat16 copy of the weight) and give its gradient in float32.
  if (cpu::amx_linear_supports(x, weight_in)) {
    const at::Tensor y = cpu::amx_linear(x, weight_in);
    return bias.defined() ? y + bias : y;
  }
  const at::Tensor weight = weight_in.to(dt);
  if (!on_onednn(x, weight)) return at::linear(x, weight, bias);
  TORCH_CHECK(x.size(-1) == weight.size(1), "linear: input of shape ", x.sizes(),
              " does not match weight of shape ", weight.sizes());
  const at::Tensor y = CpuLinearFunction::apply(x, weight);
  return bias.defined() ? y + bias : y;
}

}  // namespace titan::kernels
