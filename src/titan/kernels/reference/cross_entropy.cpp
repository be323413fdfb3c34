// The head and the loss in one op: sum over valid labels of cross-entropy(hidden @ weight^T),
// chunked so that only one chunk of float32 logits exists at a time.
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>

#include "titan/kernels/reference/reference.h"

namespace titan::kernels::reference {
namespace {

// Rows per chunk: as many as keep one chunk of float32 logits near 256 MB. Fewer, larger
// matmuls matter: a chunk of a few rows turns the weight gradient into many rank-1 updates of
// the whole [V, H] matrix.
int64_t default_chunk_rows(int64_t rows, int64_t vocab) {
  constexpr int64_t kLogitElementsPerChunk = int64_t{1} << 26;
  return std::clamp<int64_t>(kLogitElementsPerChunk / std::max<int64_t>(vocab, 1), 1,
                             std::max<int64_t>(rows, 1));
}

struct LossAndGrads {
  at::Tensor loss;         // float32 scalar
  at::Tensor grad_hidden;  // [N, H] in hidden's dtype, or undefined
  at::Tensor grad_weight;  // [V, H] in weight's dtype, or undefined
};

// Forward and both gradients of sum_i CE(hidden_i @ weight^T, labels_i), chunk by chunk.
LossAndGrads chunked_linear_cross_entropy(const at::Tensor& hidden, const at::Tensor& weight,
                                          const at::Tensor& labels, int64_t ignore_index,
                                          int64_t chunk_rows, bool need_grad_hidden,
                                          bool need_grad_weight) {
  const int64_t n = hidden.size(0), vocab = weight.size(0);
  const at::Tensor w = weight.to(hidden.scalar_type());
  LossAndGrads out;
  out.loss = at::zeros({}, hidden.options().dtype(at::kFloat));
  if (need_grad_hidden) out.grad_hidden = at::empty_like(hidden);
  at::Tensor grad_weight_acc;
  if (need_grad_weight)
    grad_weight_acc = at::zeros(weight.sizes(), weight.options().dtype(at::kFloat));
  if (chunk_rows <= 0) chunk_rows = default_chunk_rows(n, vocab);

  for (int64_t start = 0; start < n; start += chunk_rows) {
    const int64_t rows = std::min(chunk_rows, n - start);
    const at::Tensor h = hidden.narrow(0, start, rows);
    const at::Tensor y = labels.narrow(0, start, rows);
    const at::Tensor valid = y != ignore_index;
    const at::Tensor target = at::where(valid, y, 0).unsqueeze(1);
    // float32 logits of this chunk; the only [rows, V] buffer (the matmul output is reused when
    // hidden is already float32).
    at::Tensor logits = at::matmul(h, w.t()).to(at::kFloat);
    const at::Tensor lse = at::logsumexp(logits, {1}, /*keepdim=*/true);
    const at::Tensor token_loss = (lse - logits.gather(1, target)).squeeze(1);
    out.loss.add_(at::where(valid, token_loss, 0).sum());
    if (!need_grad_hidden && !need_grad_weight) continue;

    // d(loss)/d(logits) = softmax - one_hot(target), zero on ignored rows.
    at::Tensor grad_logits = logits.sub_(lse).exp_();
    grad_logits.scatter_add_(1, target, at::full_like(target, -1, grad_logits.options()));
    grad_logits.mul_(valid.unsqueeze(1));
    const at::Tensor g = grad_logits.to(hidden.scalar_type());
    if (need_grad_hidden) {
      at::Tensor rows_out = out.grad_hidden.narrow(0, start, rows);
      at::mm_out(rows_out, g, w);
    }
    if (need_grad_weight) {
      if (g.scalar_type() == at::kFloat)
        grad_weight_acc.addmm_(g.t(), h);
      else
        grad_weight_acc.add_(at::mm(g.t(), h));
    }
  }
  if (need_grad_weight) out.grad_weight = grad_weight_acc.to(weight.scalar_type());
  return out;
}

// Gradients are computed in forward (the logits never outlive a chunk); backward scales them
// by the incoming gradient.
struct LinearCrossEntropyFunction : torch::autograd::Function<LinearCrossEntropyFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& hidden,
                            const at::Tensor& weight, const at::Tensor& labels,
                            int64_t ignore_index, int64_t chunk_rows) {
    LossAndGrads r = chunked_linear_cross_entropy(hidden, weight, labels, ignore_index, chunk_rows,
                                                  hidden.requires_grad(), weight.requires_grad());
    ctx->save_for_backward({r.grad_hidden, r.grad_weight});
    return r.loss;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& g = grad_outputs[0];
    auto scaled = [&](const at::Tensor& grad) {
      return grad.defined() ? grad * g.to(grad.scalar_type()) : at::Tensor();
    };
    return {scaled(saved[0]), scaled(saved[1]), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor linear_cross_entropy_sum(const at::Tensor& hidden, const at::Tensor& weight,
                                    const at::Tensor& labels, int64_t ignore_index,
                                    int64_t chunk_rows) {
  return LinearCrossEntropyFunction::apply(hidden, weight, labels, ignore_index, chunk_rows);
}

at::Tensor cross_entropy(const at::Tensor& hidden, const at::Tensor& weight,
                         const at::Tensor& labels, int64_t ignore_index) {
  return linear_cross_entropy_sum(hidden, weight, labels, ignore_index, /*chunk_rows=*/0);
}

}  // namespace titan::kernels::reference
