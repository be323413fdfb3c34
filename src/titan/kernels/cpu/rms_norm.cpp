// The fused RMSNorm on the CPU (op rms_norm, implementation "fused").
//
// reference is five ATen ops forward (cast, square, mean, rsqrt, two multiplies) with their
// autograd nodes. Here each row is read once for its statistics and once to write the output,
// and the backward is written out. With n = x * r, r = 1/sqrt(mean(x^2) + eps), y = w * n:
//   dx = r * (dn - n * mean(dn * n)),  dn = dy * w,   dw = sum over rows of dy * n.
// As in reference, n is rounded to x's dtype before the weight multiply. dw is summed per
// fixed block of rows and the blocks are then added in order, so it does not depend on the
// thread count.
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cmath>

#include "titan/kernels/cpu/cpu_kernels.h"
#include "titan/kernels/cpu/rows.h"

namespace titan::kernels::cpu {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Rows per block of the weight-gradient reduction (fixed, for a thread-independent result).
constexpr int64_t kRowsPerBlock = 64;

std::vector<float> as_floats(const at::Tensor& t) {
  const at::Tensor f = t.to(at::kFloat).contiguous();
  return {f.const_data_ptr<float>(), f.const_data_ptr<float>() + f.numel()};
}

void forward_rows(const at::Tensor& x, const at::Tensor& w, double eps, const at::Tensor& y,
                  const at::Tensor& inv_rms) {
  const Rows xr(x), yr(y);
  const int64_t dim = xr.width();
  const std::vector<float> weight = as_floats(w);
  float* rp = inv_rms.data_ptr<float>();
  at::parallel_for(0, inv_rms.numel(), 16, [&](int64_t begin, int64_t end) {
    std::vector<float> xs, ys, normed(dim);
    std::vector<uint16_t> rounding;
    for (int64_t r = begin; r < end; ++r) {
      const float* row = xr.read(r, xs);
      const float inv = 1.0f / std::sqrt(vec::sum_squares(row, dim) / static_cast<float>(dim) +
                                         static_cast<float>(eps));
      rp[r] = inv;
      vec::scale(inv, row, normed.data(), dim);
      round_to(x.scalar_type(), normed.data(), dim, rounding);
      float* out = yr.target(r, ys);
      vec::mul(weight.data(), normed.data(), out, dim);
      yr.write(r, out);
    }
  });
}

// dx, and the float32 partial weight gradients of each block of kRowsPerBlock rows.
void backward_rows(const at::Tensor& dy, const at::Tensor& x, const at::Tensor& w,
                   const at::Tensor& inv_rms, const at::Tensor& dx, const at::Tensor& dw_blocks) {
  const Rows dyr(dy), xr(x), dxr(dx);
  const int64_t dim = xr.width(), rows = inv_rms.numel();
  const std::vector<float> weight = as_floats(w);
  const float* rp = inv_rms.const_data_ptr<float>();
  float* dwp = dw_blocks.data_ptr<float>();
  at::parallel_for(0, dw_blocks.size(0), 1, [&](int64_t block_begin, int64_t block_end) {
    std::vector<float> xs, dys, dxs, normed(dim), dn(dim);
    std::vector<uint16_t> rounding;
    for (int64_t b = block_begin; b < block_end; ++b) {
      float* dw = dwp + b * dim;
      std::fill(dw, dw + dim, 0.0f);
      for (int64_t r = b * kRowsPerBlock; r < std::min(rows, (b + 1) * kRowsPerBlock); ++r) {
        const float* xrow = xr.read(r, xs);
        const float* g = dyr.read(r, dys);
        const float inv = rp[r];
        vec::scale(inv, xrow, normed.data(), dim);
        vec::mul(g, weight.data(), dn.data(), dim);
        const float mean_dot = vec::dot(dn.data(), normed.data(), dim) / static_cast<float>(dim);
        float* out = dxr.target(r, dxs);
        vec::scaled_difference(inv, dn.data(), normed.data(), mean_dot, out, dim);
        dxr.write(r, out);
        round_to(x.scalar_type(), normed.data(), dim, rounding);  // as the forward multiplied
        vec::accumulate_product(g, normed.data(), dw, dim);
      }
    }
  });
}

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
    forward_rows(x, w, eps, y, inv_rms);
    ctx->save_for_backward({x, w});
    ctx->saved_data["inv_rms"] = inv_rms;
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &w = saved[1];
    const at::Tensor inv_rms = ctx->saved_data["inv_rms"].toTensor();
    const at::Tensor dy = grad_outputs[0].to(x.scalar_type()).contiguous();
    const int64_t rows = inv_rms.numel(), dim = x.size(-1);
    at::Tensor dx = at::empty_like(x);
    at::Tensor dw_blocks =
        at::empty({(rows + kRowsPerBlock - 1) / kRowsPerBlock, dim}, x.options().dtype(at::kFloat));
    backward_rows(dy, x, w, inv_rms, dx, dw_blocks);
    // The blocks' partial sums added in block order.
    at::Tensor dw32 = at::zeros({dim}, dw_blocks.options());
    float* total = dw32.data_ptr<float>();
    const float* part = dw_blocks.const_data_ptr<float>();
    for (int64_t b = 0; b < dw_blocks.size(0); ++b) vec::axpy(1.0f, part + b * dim, total, dim);
    return {dx, dw32.to(w.scalar_type()), at::Tensor()};
  }
};

}  // namespace

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  TORCH_CHECK(x.dim() >= 1 && weight.dim() == 1 && weight.size(0) == x.size(-1),
              "rms_norm: weight [", x.size(-1), "] expected for x ", x.sizes(), ", got ",
              weight.sizes());
  TORCH_CHECK(supports(x.device().type(), x.scalar_type()),
              "rms_norm=fused on the CPU takes float32 or bfloat16 activations, got ",
              x.scalar_type(), " on ", x.device());
  return RmsNormFunction::apply(x, weight.to(x.scalar_type()), eps);
}

bool supports(at::DeviceType device, at::ScalarType dtype) {
  return device == at::kCPU && (dtype == at::kFloat || dtype == at::kBFloat16);
}

}  // namespace titan::kernels::cpu
