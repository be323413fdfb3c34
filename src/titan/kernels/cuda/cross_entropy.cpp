// The chunked head + cross-entropy on CUDA. Per chunk of rows: the logits GEMM in the
// activations' dtype, one kernel (cross_entropy.cu) that computes the rows' losses and turns
// the logits in place into their gradient, then the two gradient GEMMs. Gradients are computed
// in forward (the logits never outlive their chunk); backward scales them by the incoming
// gradient, in place. The loss stays on the device.
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>

#include "titan/kernels/cuda/cuda_kernels.h"
#include "titan/kernels/cuda/launchers.h"

namespace titan::kernels::cuda {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Rows per chunk: about 2^26 logits (128 MB in bf16) at a time.
int64_t chunk_rows_for(int64_t rows, int64_t vocab) {
  constexpr int64_t kLogitsPerChunk = int64_t{1} << 26;
  return std::clamp<int64_t>(kLogitsPerChunk / std::max<int64_t>(vocab, 1), 1,
                             std::max<int64_t>(rows, 1));
}

class CrossEntropyFunction : public torch::autograd::Function<CrossEntropyFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& hidden_in,
                            const at::Tensor& weight, const at::Tensor& labels_in,
                            int64_t ignore_index) {
    const at::Tensor hidden = hidden_in.contiguous();
    const at::Tensor labels = labels_in.contiguous();
    const bool grad_hidden = hidden_in.requires_grad(), grad_weight = weight.requires_grad();
    const bool write_grad = grad_hidden || grad_weight;
    const int64_t n = hidden.size(0), vocab = weight.size(0);
    const at::Tensor w = weight.to(hidden.scalar_type());
    at::Tensor row_loss = at::empty({n}, hidden.options().dtype(at::kFloat));
    at::Tensor dh = grad_hidden ? at::empty_like(hidden) : at::Tensor();
    at::Tensor dw =
        grad_weight ? at::zeros(weight.sizes(), weight.options().dtype(at::kFloat)) : at::Tensor();
    const int64_t chunk = chunk_rows_for(n, vocab);
    for (int64_t start = 0; start < n; start += chunk) {
      const int64_t rows = std::min(chunk, n - start);
      const at::Tensor h = hidden.narrow(0, start, rows);
      at::Tensor logits = at::mm(h, w.t());  // [rows, V] in the activations' dtype
      at::Tensor loss_rows = row_loss.narrow(0, start, rows);
      cross_entropy_rows(logits, labels.narrow(0, start, rows), ignore_index, write_grad,
                         loss_rows);
      if (grad_hidden) {
        at::Tensor dh_rows = dh.narrow(0, start, rows);
        at::mm_out(dh_rows, logits, w);
      }
      if (grad_weight) dw.add_(at::mm(logits.t(), h));
    }
    ctx->save_for_backward({dh, grad_weight ? dw.to(weight.scalar_type()) : at::Tensor()});
    return row_loss.sum();
  }

  // The saved gradients are scaled in place (they are this node's alone, and then belong to
  // the parameters: no [vocab, hidden] copy). A second backward through the same graph finds
  // them modified and autograd says so.
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    auto saved = ctx->get_saved_variables();
    const at::Tensor& g = grad_outputs[0];
    for (at::Tensor& grad : saved)
      if (grad.defined()) grad.mul_(g.to(grad.scalar_type()));
    return {saved[0], saved[1], at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor cross_entropy(const at::Tensor& hidden, const at::Tensor& weight,
                         const at::Tensor& labels, int64_t ignore_index) {
  TORCH_CHECK(hidden.is_cuda() && hidden.dim() == 2 && weight.dim() == 2 &&
                  weight.size(1) == hidden.size(1) && labels.numel() == hidden.size(0),
              "cross_entropy (cuda): hidden [N, H], weight [V, H] and labels [N] on a CUDA "
              "device expected, got ",
              hidden.sizes(), ", ", weight.sizes(), ", ", labels.sizes());
  TORCH_CHECK(weight.device() == hidden.device() && labels.device() == hidden.device(),
              "cross_entropy (cuda): hidden, weight and labels must be on one device");
  return CrossEntropyFunction::apply(hidden, weight, labels.reshape({-1}).to(at::kLong),
                                     ignore_index);
}

}  // namespace titan::kernels::cuda
