// The fused MoE experts kernel on the CPU (op moe_experts, implementation "fused").
//
// reference runs ~12 ATen ops forward (a sort, gathers, two grouped GEMMs, chunk, silu, mul,
// a scatter and a reduction) and autograd records each with its own saved tensors. Here the
// routing becomes one counting sort, the elementwise work (SwiGLU, the combine weights, the
// reduction over the k slots) is done in single passes around per-expert GEMMs, and the
// backward is written out: for expert e with rows X_e (the tokens routed to it, in slot order),
//   H_e = X_e Wgu_e^T        A_e = silu(G_e) * U_e  (H_e = [G_e | U_e])     Y_e = A_e Wd_e^T
//   out[t] = sum_s w[t,s] * Y[row(t,s)]
// and in reverse
//   dw[t,s] = <g[t], Y[row(t,s)]>    dY[row(t,s)] = w[t,s] g[t]
//   dA_e = dY_e Wd_e                 dWd_e = dY_e^T A_e
//   dG = dA * U * silu'(G)           dU = dA * silu(G)
//   dX_e = dH_e Wgu_e                dWgu_e = dH_e^T X_e        dx[t] = sum_s dX[row(t,s)].
// Every reduction runs in a fixed order (per row or per token), so results do not depend on
// the thread count. Elementwise math is in float32 whatever the dtype (vector_math.h).
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cmath>
#include <vector>

#include "titan/kernels/cpu/cpu_kernels.h"
#include "titan/kernels/cpu/gemm.h"
#include "titan/kernels/cpu/rows.h"

namespace titan::kernels::cpu {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Rows per task of the row-parallel loops: enough work to amortise a task.
constexpr int64_t kRowGrain = 16;

// Where each (token, slot) pair goes when the pairs are grouped by expert (stable: within an
// expert, pairs keep their token order, as reference's stable sort does).
struct ExpertRows {
  std::vector<int64_t> offsets;  // [E + 1]: expert e owns permuted rows offsets[e]..offsets[e+1]
  at::Tensor token_of_row;       // [T*k] int64: the token whose copy permuted row r is
  at::Tensor row_of_slot;        // [T*k] int64: the permuted row of pair (t, s), t*k + s
};

ExpertRows sort_by_expert(const at::Tensor& top_experts, int64_t num_experts) {
  const at::Tensor experts = top_experts.contiguous();
  const int64_t pairs = experts.numel();
  const int64_t top_k = experts.size(1);
  const int64_t* id = experts.const_data_ptr<int64_t>();
  ExpertRows r;
  r.offsets.assign(num_experts + 1, 0);
  for (int64_t p = 0; p < pairs; ++p) {
    TORCH_CHECK(id[p] >= 0 && id[p] < num_experts, "moe_experts: expert id ", id[p],
                " out of range [0, ", num_experts, ")");
    ++r.offsets[id[p] + 1];
  }
  for (int64_t e = 0; e < num_experts; ++e) r.offsets[e + 1] += r.offsets[e];
  r.token_of_row = at::empty({pairs}, experts.options());
  r.row_of_slot = at::empty({pairs}, experts.options());
  int64_t* token_of_row = r.token_of_row.data_ptr<int64_t>();
  int64_t* row_of_slot = r.row_of_slot.data_ptr<int64_t>();
  std::vector<int64_t> next(r.offsets.begin(), r.offsets.end() - 1);
  for (int64_t p = 0; p < pairs; ++p) {
    const int64_t row = next[id[p]]++;
    token_of_row[row] = p / top_k;
    row_of_slot[p] = row;
  }
  return r;
}

// fn(e, first_row, rows) for every expert e that received rows.
template <typename Fn>
void for_each_expert(const std::vector<int64_t>& offsets, Fn fn) {
  for (size_t e = 0; e + 1 < offsets.size(); ++e)
    if (offsets[e + 1] > offsets[e])
      fn(static_cast<int64_t>(e), offsets[e], offsets[e + 1] - offsets[e]);
}

// Zeroes the gradient of every expert that received no rows (the others are written whole by
// their GEMM, so zeroing them first would only cost a pass over the weights' size).
at::Tensor zero_where_empty(at::Tensor grad, const std::vector<int64_t>& offsets) {
  for (size_t e = 0; e + 1 < offsets.size(); ++e)
    if (offsets[e + 1] == offsets[e]) grad[static_cast<int64_t>(e)].zero_();
  return grad;
}

// out[rows of e] = a[rows of e] @ b(e) for every expert that received rows; b(e) is a view.
template <typename WeightOf>
void per_expert_mm(const std::vector<int64_t>& offsets, const at::Tensor& a, const at::Tensor& out,
                   WeightOf b) {
  for_each_expert(offsets, [&](int64_t e, int64_t begin, int64_t n) {
    gemm_out(a.narrow(0, begin, n), b(e), out.narrow(0, begin, n));
  });
}

// A = silu(G) * U for H = [G | U], row by row.
void swiglu_rows(const at::Tensor& h, const at::Tensor& a) {
  const Rows hr(h), ar(a);
  const int64_t inter = ar.width();
  at::parallel_for(0, a.size(0), kRowGrain, [&](int64_t begin, int64_t end) {
    std::vector<float> hs, as;
    for (int64_t r = begin; r < end; ++r) {
      const float* row = hr.read(r, hs);
      float* out = ar.target(r, as);
      vec::silu_mul(row, row + inter, out, inter);
      ar.write(r, out);
    }
  });
}

// dH = [dA * U * silu'(G) | dA * silu(G)], row by row.
void swiglu_backward_rows(const at::Tensor& h, const at::Tensor& da, const at::Tensor& dh) {
  const Rows hr(h), dar(da), dhr(dh);
  const int64_t inter = dar.width();
  at::parallel_for(0, da.size(0), kRowGrain, [&](int64_t begin, int64_t end) {
    std::vector<float> hs, das, dhs;
    for (int64_t r = begin; r < end; ++r) {
      const float* row = hr.read(r, hs);
      const float* d = dar.read(r, das);
      float* out = dhr.target(r, dhs);
      vec::silu_mul_backward(row, row + inter, d, out, out + inter, inter);
      dhr.write(r, out);
    }
  });
}

// out[t] = sum_s w[t,s] * y[row(t,s)] (w undefined: weight 1), per token in slot order.
void combine_tokens(const at::Tensor& y, const at::Tensor& w, const at::Tensor& row_of_slot,
                    const at::Tensor& out) {
  const int64_t tokens = out.size(0);
  const int64_t top_k = row_of_slot.numel() / std::max<int64_t>(tokens, 1);
  const Rows yr(y), outr(out);
  const at::Tensor w32 = w.defined() ? w.to(at::kFloat).contiguous() : at::Tensor();
  const float* wp = w32.defined() ? w32.const_data_ptr<float>() : nullptr;
  const int64_t* rows = row_of_slot.const_data_ptr<int64_t>();
  at::parallel_for(0, tokens, kRowGrain, [&](int64_t begin, int64_t end) {
    std::vector<float> ys, accs;
    for (int64_t t = begin; t < end; ++t) {
      float* acc = outr.target(t, accs);
      std::fill(acc, acc + outr.width(), 0.0f);
      for (int64_t s = 0; s < top_k; ++s)
        vec::axpy(wp ? wp[t * top_k + s] : 1.0f, yr.read(rows[t * top_k + s], ys), acc,
                  outr.width());
      outr.write(t, acc);
    }
  });
}

// The combine's backward: dy[row(t,s)] = w[t,s] g[t] and dw[t,s] = <g[t], y[row(t,s)]>.
// Returns dw (float32 [T, k]).
at::Tensor combine_backward(const at::Tensor& g, const at::Tensor& y, const at::Tensor& w,
                            const at::Tensor& row_of_slot, const at::Tensor& dy) {
  const int64_t top_k = w.size(1), hidden = g.size(1);
  const Rows gr(g), yr(y), dyr(dy);
  const at::Tensor w32 = w.to(at::kFloat).contiguous();
  const float* wp = w32.const_data_ptr<float>();
  at::Tensor dw = at::empty(w.sizes(), w.options().dtype(at::kFloat));
  float* dwp = dw.data_ptr<float>();
  const int64_t* rows = row_of_slot.const_data_ptr<int64_t>();
  at::parallel_for(0, g.size(0), kRowGrain, [&](int64_t begin, int64_t end) {
    std::vector<float> gs, ys, dys;
    for (int64_t t = begin; t < end; ++t) {
      const float* gt = gr.read(t, gs);
      for (int64_t s = 0; s < top_k; ++s) {
        const int64_t row = rows[t * top_k + s];
        dwp[t * top_k + s] = vec::dot(gt, yr.read(row, ys), hidden);
        float* d = dyr.target(row, dys);
        vec::scale(wp[t * top_k + s], gt, d, hidden);
        dyr.write(row, d);
      }
    }
  });
  return dw;
}

at::Tensor offsets_tensor(const std::vector<int64_t>& offsets) {
  return at::tensor(at::ArrayRef<int64_t>(offsets), at::kLong);
}

std::vector<int64_t> offsets_vector(const at::Tensor& t) {
  const int64_t* p = t.const_data_ptr<int64_t>();
  return {p, p + t.numel()};
}

class MoeExpertsFunction : public torch::autograd::Function<MoeExpertsFunction> {
 public:
  // gate_up and down arrive already in x's dtype (the cast is an autograd op outside).
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x_in,
                            const at::Tensor& weights_in, const at::Tensor& top_experts,
                            const at::Tensor& gate_up, const at::Tensor& down) {
    const at::Tensor x = x_in.contiguous();
    const at::Tensor weights = weights_in.contiguous();
    const int64_t num_experts = gate_up.size(0);
    const int64_t inter = down.size(2);
    ExpertRows plan = sort_by_expert(top_experts, num_experts);
    const int64_t rows = plan.token_of_row.numel();

    const at::Tensor xs = x.index_select(0, plan.token_of_row);  // [T*k, H] grouped by expert
    at::Tensor h = at::empty({rows, 2 * inter}, x.options());
    per_expert_mm(plan.offsets, xs, h, [&](int64_t e) { return gate_up[e].t(); });
    at::Tensor a = at::empty({rows, inter}, x.options());
    swiglu_rows(h, a);
    at::Tensor y = at::empty({rows, x.size(1)}, x.options());
    per_expert_mm(plan.offsets, a, y, [&](int64_t e) { return down[e].t(); });
    at::Tensor out = at::empty_like(x);
    combine_tokens(y, weights, plan.row_of_slot, out);

    ctx->save_for_backward({x, weights, gate_up, down});
    ctx->saved_data["h"] = h;
    ctx->saved_data["a"] = a;
    ctx->saved_data["y"] = y;
    ctx->saved_data["token_of_row"] = plan.token_of_row;
    ctx->saved_data["row_of_slot"] = plan.row_of_slot;
    ctx->saved_data["offsets"] = offsets_tensor(plan.offsets);
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &weights = saved[1], &gate_up = saved[2], &down = saved[3];
    const at::Tensor h = ctx->saved_data["h"].toTensor();
    const at::Tensor a = ctx->saved_data["a"].toTensor();
    const at::Tensor y = ctx->saved_data["y"].toTensor();
    const at::Tensor token_of_row = ctx->saved_data["token_of_row"].toTensor();
    const at::Tensor row_of_slot = ctx->saved_data["row_of_slot"].toTensor();
    const std::vector<int64_t> offsets = offsets_vector(ctx->saved_data["offsets"].toTensor());
    const at::Tensor g = grad_outputs[0].to(x.scalar_type()).contiguous();
    const int64_t rows = h.size(0);

    at::Tensor dy = at::empty_like(y);
    const at::Tensor dweights =
        combine_backward(g, y, weights, row_of_slot, dy).to(weights.scalar_type());
    at::Tensor da = at::empty_like(a);
    per_expert_mm(offsets, dy, da, [&](int64_t e) { return down[e]; });
    at::Tensor ddown = zero_where_empty(at::empty_like(down), offsets);
    for_each_expert(offsets, [&](int64_t e, int64_t begin, int64_t n) {
      gemm_out(dy.narrow(0, begin, n).t(), a.narrow(0, begin, n), ddown[e]);
    });
    at::Tensor dh = at::empty_like(h);
    swiglu_backward_rows(h, da, dh);
    at::Tensor dxs = at::empty({rows, x.size(1)}, x.options());
    per_expert_mm(offsets, dh, dxs, [&](int64_t e) { return gate_up[e]; });
    const at::Tensor xs = x.index_select(0, token_of_row);
    at::Tensor dgate_up = zero_where_empty(at::empty_like(gate_up), offsets);
    for_each_expert(offsets, [&](int64_t e, int64_t begin, int64_t n) {
      gemm_out(dh.narrow(0, begin, n).t(), xs.narrow(0, begin, n), dgate_up[e]);
    });
    at::Tensor dx = at::empty_like(x);
    combine_tokens(dxs, at::Tensor(), row_of_slot, dx);
    return {dx, dweights, at::Tensor(), dgate_up, ddown};
  }
};

}  // namespace

at::Tensor moe_experts(const at::Tensor& x, const Routing& routing, const at::Tensor& gate_up,
                       const at::Tensor& down) {
  TORCH_CHECK(x.dim() == 2 && routing.top_experts.dim() == 2 &&
                  routing.top_weights.sizes() == routing.top_experts.sizes() &&
                  routing.top_experts.size(0) == x.size(0),
              "moe_experts: x [T, H] and routing [T, k] expected, got x ", x.sizes(),
              ", top_experts ", routing.top_experts.sizes(), ", top_weights ",
              routing.top_weights.sizes());
  TORCH_CHECK(gate_up.dim() == 3 && down.dim() == 3 && gate_up.size(2) == x.size(1) &&
                  down.size(1) == x.size(1) && gate_up.size(1) == 2 * down.size(2) &&
                  down.size(0) == gate_up.size(0),
              "moe_experts: gate_up [E, 2*Im, H] and down [E, H, Im] expected, got ",
              gate_up.sizes(), " and ", down.sizes());
  const auto dtype = x.scalar_type();
  TORCH_CHECK(supports(x.device().type(), dtype),
              "moe_experts=fused on the CPU takes float32 or bfloat16 activations, got ", dtype,
              " on ", x.device());
  return MoeExpertsFunction::apply(x, routing.top_weights.to(dtype), routing.top_experts,
                                   gate_up.to(dtype), down.to(dtype));
}

}  // namespace titan::kernels::cpu
