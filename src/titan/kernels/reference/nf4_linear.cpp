// nf4_linear, the plain way: the whole weight dequantised (kernels/nf4.h), one at::linear. The
// backward dequantises it again instead of keeping it from the forward.
#include <torch/csrc/autograd/custom_function.h>

#include "titan/kernels/nf4.h"
#include "titan/kernels/nf4_matmul.h"
#include "titan/kernels/reference/reference.h"

namespace titan::kernels::reference {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct Nf4LinearFunction : public torch::autograd::Function<Nf4LinearFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& packed,
                            const at::Tensor& absmax, int64_t rows, int64_t cols,
                            int64_t blocksize) {
    const Nf4Weight w{packed, absmax, rows, cols, blocksize};
    save_nf4_weight(ctx, w);
    return at::linear(x, dequantize_nf4(w, x.scalar_type()).to(x.device()));
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const Nf4Weight w = saved_nf4_weight(ctx);
    variable_list out(6);
    if (grads[0].defined())
      out[0] =
          at::matmul(grads[0], dequantize_nf4(w, grads[0].scalar_type()).to(grads[0].device()));
    return out;
  }
};

}  // namespace

at::Tensor nf4_linear(const at::Tensor& x, const Nf4Weight& weight) {
  TORCH_CHECK(x.size(-1) == weight.cols, "nf4_linear: input [..., ", x.size(-1),
              "] against a weight [", weight.rows, ", ", weight.cols, "]");
  return Nf4LinearFunction::apply(x, weight.packed, weight.absmax, weight.rows, weight.cols,
                                  weight.blocksize);
}

}  // namespace titan::kernels::reference
