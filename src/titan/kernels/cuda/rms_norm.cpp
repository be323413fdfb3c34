// The fused RMSNorm on CUDA as an autograd function (kernels in rms_norm.cu).
#include <torch/csrc/autograd/custom_function.h>

#include "titan/kernels/cuda/cuda_kernels.h"
#include "titan/kernels/cuda/launchers.h"

namespace titan::kernels::cuda {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

class RmsNormFunction : public torch::autograd::Function<RmsNormFunction> {
 public:
  // weight arrives already in x's dtype (the cast is an autograd op outside).
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x_in, const at::Tensor& weight,
                            double eps) {
    const at::Tensor x = x_in.contiguous();
    const at::Tensor w = weight.contiguous();
    at::Tensor y = at::empty_like(x);
    at::Tensor inv_rms =
        at::empty({x.numel() / std::max<int64_t>(x.size(-1), 1)}, x.options().dtype(at::kFloat));
    rms_norm_forward(x, w, eps, y, inv_rms);
    ctx->save_for_backward({x, w, inv_rms});
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &w = saved[1], &inv_rms = saved[2];
    const at::Tensor dy = grad_outputs[0].to(x.scalar_type()).contiguous();
    const int64_t rows = inv_rms.numel();
    at::Tensor dx = at::empty_like(x);
    at::Tensor dw_blocks =
        at::empty({(rows + kRmsNormRowsPerBlock - 1) / kRmsNormRowsPerBlock, x.size(-1)},
                  x.options().dtype(at::kFloat));
    rms_norm_backward(dy, x, w, inv_rms, dx, dw_blocks);
    return {dx, dw_blocks.sum(0).to(w.scalar_type()), at::Tensor()};
  }
};

}  // namespace

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  TORCH_CHECK(x.is_cuda() && x.dim() >= 1 && weight.dim() == 1 && weight.size(0) == x.size(-1),
              "rms_norm (cuda): weight [", x.size(-1), "] on a CUDA device expected for x ",
              x.sizes(), ", got ", weight.sizes());
  TORCH_CHECK(weight.device() == x.device(), "rms_norm (cuda): weight on ", weight.device(),
              ", x on ", x.device());
  return RmsNormFunction::apply(x, weight.to(x.scalar_type()), eps);
}

bool supports(at::DeviceType device, at::ScalarType dtype) {
  return device == at::kCUDA &&
         (dtype == at::kFloat || dtype == at::kBFloat16 || dtype == at::kHalf);
}

}  // namespace titan::kernels::cuda
