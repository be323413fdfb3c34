// The MoE experts on CUDA: routing sorted on the device, a gather into expert order and a
// weighted combine back (kernels in moe.cu, as autograd functions), the two grouped GEMMs
// (at::_grouped_mm with int32 offsets, autograd by ATen) and the fused SwiGLU between them.
// Nothing here reads a device value on the host, so the step has no sync.
#include <torch/csrc/autograd/custom_function.h>

#include "titan/kernels/cuda/cuda_kernels.h"
#include "titan/kernels/cuda/launchers.h"
#include "titan/kernels/cuda/silu_mul.h"

namespace titan::kernels::cuda {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct ExpertRows {
  at::Tensor token_of_row;  // [T*k] int64: the token of each row in expert order
  at::Tensor row_of_slot;   // [T*k] int64: the row of pair (t, s), t*k + s
  at::Tensor offsets;       // [E] int32: cumulative row counts (the groups' ends)
};

ExpertRows sort_by_expert(const at::Tensor& top_experts, int64_t num_experts) {
  at::NoGradGuard no_grad;
  const at::Tensor flat = top_experts.reshape({-1});
  const int64_t top_k = top_experts.size(1);
  ExpertRows r;
  const at::Tensor perm = std::get<1>(at::sort(flat, /*stable=*/true, 0, /*descending=*/false));
  r.token_of_row = at::div(perm, top_k, "floor");
  r.row_of_slot = at::empty_like(perm);
  r.row_of_slot.scatter_(0, perm, at::arange(perm.numel(), perm.options()));
  // scatter_add rather than bincount: bincount reads the maximum back to the host.
  const at::Tensor counts = at::zeros({num_experts}, flat.options().dtype(at::kInt))
                                .scatter_add_(0, flat, at::ones_like(flat, at::kInt));
  r.offsets = at::cumsum(counts, 0, at::kInt);
  return r;
}

class GatherFunction : public torch::autograd::Function<GatherFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x_in,
                            const at::Tensor& token_of_row, const at::Tensor& row_of_slot) {
    const at::Tensor x = x_in.contiguous();
    at::Tensor out = at::empty({token_of_row.numel(), x.size(1)}, x.options());
    gather_rows(x, token_of_row, out);
    ctx->save_for_backward({row_of_slot});
    ctx->saved_data["tokens"] = x.size(0);
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const at::Tensor row_of_slot = ctx->get_saved_variables()[0];
    const int64_t tokens = ctx->saved_data["tokens"].toInt();
    const at::Tensor g = grad_outputs[0].contiguous();
    at::Tensor dx = at::empty({tokens, g.size(1)}, g.options());
    combine_rows(g, at::Tensor(), row_of_slot, row_of_slot.numel() / std::max<int64_t>(tokens, 1),
                 dx);
    return {dx, at::Tensor(), at::Tensor()};
  }
};

class CombineFunction : public torch::autograd::Function<CombineFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& y_in,
                            const at::Tensor& weights_in, const at::Tensor& row_of_slot) {
    const at::Tensor y = y_in.contiguous(), weights = weights_in.contiguous();
    at::Tensor out = at::empty({weights.size(0), y.size(1)}, y.options());
    combine_rows(y, weights, row_of_slot, weights.size(1), out);
    ctx->save_for_backward({y, weights, row_of_slot});
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &y = saved[0], &weights = saved[1], &row_of_slot = saved[2];
    const at::Tensor g = grad_outputs[0].to(y.scalar_type()).contiguous();
    at::Tensor dy = at::empty_like(y);  // every row is written: each row is one pair's
    at::Tensor dw = at::empty_like(weights);
    combine_rows_backward(g, y, weights, row_of_slot, dy, dw);
    return {dy, dw, at::Tensor()};
  }
};

}  // namespace

at::Tensor moe_experts(const at::Tensor& x, const Routing& routing, const at::Tensor& gate_up,
                       const at::Tensor& down) {
  TORCH_CHECK(x.is_cuda() && x.dim() == 2 && routing.top_experts.dim() == 2 &&
                  routing.top_weights.sizes() == routing.top_experts.sizes() &&
                  routing.top_experts.size(0) == x.size(0),
              "moe_experts (cuda): x [T, H] and routing [T, k] on a CUDA device expected, got x ",
              x.sizes(), ", top_experts ", routing.top_experts.sizes());
  TORCH_CHECK(gate_up.dim() == 3 && down.dim() == 3 && gate_up.size(2) == x.size(1) &&
                  down.size(1) == x.size(1) && gate_up.size(1) == 2 * down.size(2) &&
                  down.size(0) == gate_up.size(0),
              "moe_experts (cuda): gate_up [E, 2*Im, H] and down [E, H, Im] expected, got ",
              gate_up.sizes(), " and ", down.sizes());
  for (const at::Tensor* t : {&routing.top_experts, &routing.top_weights, &gate_up, &down})
    TORCH_CHECK(t->device() == x.device(), "moe_experts (cuda): every input must be on ",
                x.device(), ", got one on ", t->device());
  const auto dtype = x.scalar_type();
  const ExpertRows plan = sort_by_expert(routing.top_experts, gate_up.size(0));
  const at::Tensor rows = GatherFunction::apply(x, plan.token_of_row, plan.row_of_slot);
  const at::Tensor h = at::_grouped_mm(rows, gate_up.to(dtype).transpose(-2, -1), plan.offsets);
  const at::Tensor a = silu_mul(h);
  const at::Tensor y = at::_grouped_mm(a, down.to(dtype).transpose(-2, -1), plan.offsets);
  return CombineFunction::apply(y, routing.top_weights.to(dtype), plan.row_of_slot);
}

}  // namespace titan::kernels::cuda
