#include "titan/kernels/lora_add.h"

#include <omp.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>

namespace titan::kernels {
namespace {

// The adapter's products are small (rank r: a few million multiply-adds at a few hundred tokens),
// and so are its casts (r x in, out x r). ATen would run each as a parallel region, which costs
// little on an idle machine but, on a machine whose cores are shared with other work, waits for
// the other threads to be scheduled: about 10 ms a region at a load of 5 per core, against tens
// of microseconds of work. Below this many multiply-adds per product (about a quarter of a
// millisecond on one core) they run on the calling thread.
constexpr int64_t kSerialMultiplyAdds = int64_t{1} << 25;

// OpenMP's thread count for the calling thread's regions (ATen's and oneDNN's), set to one for
// the scope's lifetime when `serial`.
class SerialScope {
 public:
  explicit SerialScope(bool serial) : saved_(serial ? omp_get_max_threads() : 0) {
    if (serial) omp_set_num_threads(1);
  }
  ~SerialScope() {
    if (saved_ > 0) omp_set_num_threads(saved_);
  }
  SerialScope(const SerialScope&) = delete;
  SerialScope& operator=(const SerialScope&) = delete;

 private:
  int saved_;
};

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct LoraAdd : public torch::autograd::Function<LoraAdd> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& y, const at::Tensor& x,
                            const at::Tensor& a, const at::Tensor& b, double scale) {
    const auto dt = x.scalar_type();
    const int64_t tokens = x.numel() / std::max<int64_t>(x.size(-1), 1);
    const bool serial = tokens * a.size(0) * std::max(a.size(1), b.size(0)) <= kSerialMultiplyAdds;
    const SerialScope scope(serial);
    // The casts are the adapters' (r x in and out x r elements), kept for the backward as the
    // op-by-op term's linear ops keep them.
    const at::Tensor a_c = a.to(dt), b_c = b.to(dt);
    const at::Tensor rows = x.reshape({-1, x.size(-1)});
    // h * scale: [tokens, r], where the scale costs least (exact for a power of two).
    const at::Tensor h = at::mm(rows, a_c.t()).mul_(scale);
    const at::Tensor out = at::addmm(y.reshape({-1, y.size(-1)}), h, b_c.t());
    ctx->save_for_backward({rows, h, a_c, b_c});
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["serial"] = serial;
    ctx->saved_data["x_shape"] = x.sizes().vec();
    ctx->saved_data["a_dtype"] = static_cast<int64_t>(a.scalar_type());
    ctx->saved_data["b_dtype"] = static_cast<int64_t>(b.scalar_type());
    return out.view(y.sizes());
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &rows = saved[0], &h = saved[1], &a_c = saved[2], &b_c = saved[3];
    const double scale = ctx->saved_data["scale"].toDouble();
    const SerialScope scope(ctx->saved_data["serial"].toBool());
    variable_list out(5);
    const at::Tensor& dy = grads[0];
    if (!dy.defined()) return out;
    // Contiguous once, for both: the base's backward (which would otherwise make its own copy
    // of a strided gradient, such as the query's after the heads' transpose) and the products.
    const at::Tensor dy_c = dy.contiguous();
    out[0] = dy_c;
    const at::Tensor dy_rows = dy_c.view({-1, dy.size(-1)});
    const bool need_x = ctx->needs_input_grad(1), need_a = ctx->needs_input_grad(2);
    if (need_x || need_a) {
      const at::Tensor g = at::mm(dy_rows, b_c).mul_(scale);  // [tokens, r]
      if (need_x) out[1] = at::mm(g, a_c).view(ctx->saved_data["x_shape"].toIntVector());
      if (need_a) {
        const auto dtype = static_cast<at::ScalarType>(ctx->saved_data["a_dtype"].toInt());
        out[2] = at::mm(g.t(), rows).to(dtype);
      }
    }
    if (ctx->needs_input_grad(3)) {
      const auto dtype = static_cast<at::ScalarType>(ctx->saved_data["b_dtype"].toInt());
      out[3] = at::mm(dy_rows.t(), h).to(dtype);
    }
    return out;
  }
};

}  // namespace

at::Tensor lora_add(const at::Tensor& y, const at::Tensor& x, const at::Tensor& a,
                    const at::Tensor& b, double scale) {
  TORCH_CHECK(x.size(-1) == a.size(1) && a.size(0) == b.size(1) && y.size(-1) == b.size(0) &&
                  y.numel() / y.size(-1) == x.numel() / x.size(-1),
              "lora_add: output ", y.sizes(), ", input ", x.sizes(), ", A ", a.sizes(), ", B ",
              b.sizes(), " do not fit");
  return LoraAdd::apply(y, x, a, b, scale);
}

}  // namespace titan::kernels
