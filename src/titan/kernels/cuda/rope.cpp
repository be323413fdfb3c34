// The fused rotary embedding on CUDA as an autograd function (kernel in rope.cu).
#include <torch/csrc/autograd/custom_function.h>

#include "titan/kernels/cuda/cuda_kernels.h"
#include "titan/kernels/cuda/launchers.h"

namespace titan::kernels::cuda {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

at::Tensor unit_last_stride(const at::Tensor& t) { return t.stride(-1) == 1 ? t : t.contiguous(); }

class RopeFunction : public torch::autograd::Function<RopeFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const at::Tensor& q_in, const at::Tensor& k_in,
                               const at::Tensor& cos_in, const at::Tensor& sin_in) {
    const at::Tensor q = unit_last_stride(q_in), k = unit_last_stride(k_in);
    const at::Tensor cos = cos_in.contiguous(), sin = sin_in.contiguous();
    at::Tensor q_out = at::empty(q.sizes(), q.options());
    at::Tensor k_out = at::empty(k.sizes(), k.options());
    rope_apply(q, k, cos, sin, /*inverse=*/false, q_out, k_out);
    ctx->save_for_backward({cos, sin});
    return {q_out, k_out};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &cos = saved[0], &sin = saved[1];
    auto contiguous_or_none = [](const at::Tensor& g) {
      return g.defined() ? g.contiguous() : at::Tensor();
    };
    at::Tensor gq = contiguous_or_none(grad_outputs[0]);
    at::Tensor gk = contiguous_or_none(grad_outputs[1]);
    // An output nobody used has no gradient: it takes part in the launch with zero heads.
    if (!gq.defined()) gq = at::empty({gk.size(0), 0, gk.size(2), gk.size(3)}, gk.options());
    if (!gk.defined()) gk = at::empty({gq.size(0), 0, gq.size(2), gq.size(3)}, gq.options());
    at::Tensor dq = at::empty(gq.sizes(), gq.options());
    at::Tensor dk = at::empty(gk.sizes(), gk.options());
    rope_apply(gq, gk, cos, sin, /*inverse=*/true, dq, dk);
    return {grad_outputs[0].defined() ? dq : at::Tensor(),
            grad_outputs[1].defined() ? dk : at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

RotatedQueryKey rope(const at::Tensor& q, const at::Tensor& k, const at::Tensor& cos,
                     const at::Tensor& sin) {
  TORCH_CHECK(q.is_cuda() && q.dim() == 4 && k.dim() == 4 && q.size(0) == k.size(0) &&
                  q.size(2) == k.size(2) && q.size(3) == k.size(3) && q.size(3) % 2 == 0 &&
                  cos.dim() == 2 && cos.sizes() == sin.sizes() && cos.size(0) == q.size(2) &&
                  cos.size(1) == q.size(3),
              "rope (cuda): q [B, nq, S, d], k [B, nkv, S, d] and cos/sin [S, d] expected, got q ",
              q.sizes(), ", k ", k.sizes(), ", cos ", cos.sizes());
  const auto dtype = q.scalar_type();
  TORCH_CHECK(k.scalar_type() == dtype, "rope (cuda): q and k must share a dtype");
  for (const at::Tensor* t : {&k, &cos, &sin})
    TORCH_CHECK(t->device() == q.device(), "rope (cuda): every input must be on ", q.device(),
                ", got one on ", t->device());
  variable_list out = RopeFunction::apply(q, k, cos.to(dtype), sin.to(dtype));
  return {out[0], out[1]};
}

}  // namespace titan::kernels::cuda
