#include "titan/train/loss.h"

#include <algorithm>

#include <torch/csrc/autograd/custom_function.h>

#include <string>

#include "titan/common/error.h"

namespace titan::train {
namespace {

std::string shape_string(at::IntArrayRef shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// Checks that `rows` (logits or hidden, [..., D]) and labels agree and returns the labels
// flattened to [N].
at::Tensor flat_labels(const at::Tensor& rows, const at::Tensor& labels, const char* what) {
  TITAN_CHECK(rows.dim() == 2 || rows.dim() == 3, "loss: ", what,
              " must be [N, D] or [B, S, D], got ", shape_string(rows.sizes()));
  TITAN_CHECK(labels.sizes() == rows.sizes().slice(0, rows.dim() - 1), "loss: labels of shape ",
              shape_string(labels.sizes()), " do not match ", what, " of shape ",
              shape_string(rows.sizes()));
  TITAN_CHECK(labels.scalar_type() == at::kLong, "loss: labels must be int64, got ",
              labels.scalar_type());
  return labels.reshape({-1});
}

at::Tensor divide_by_count(const at::Tensor& sum, const at::Tensor& labels, int64_t ignore_index) {
  return sum / valid_token_count(labels, ignore_index).clamp_min(1).to(sum.scalar_type());
}

// Rows per chunk: as many as keep one chunk of float32 logits near 256 MB. Fewer, larger
// matmuls matter: a chunk of a few rows turns the weight gradient into many rank-1 updates of
// the whole [V, H] matrix.
int64_t default_chunk_rows(int64_t rows, int64_t hidden, int64_t vocab) {
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
  if (chunk_rows <= 0) chunk_rows = default_chunk_rows(n, hidden.size(1), vocab);

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

// The Liger-Kernel approach: gradients are computed in forward (the logits never outlive a
// chunk) and backward scales them by the incoming gradient.
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

at::Tensor valid_token_count(const at::Tensor& labels, int64_t ignore_index) {
  return (labels != ignore_index).sum();
}

int64_t count_valid_tokens(const at::Tensor& labels, int64_t ignore_index) {
  return valid_token_count(labels, ignore_index).item<int64_t>();
}

at::Tensor cross_entropy_sum(const at::Tensor& logits, const at::Tensor& labels,
                             int64_t ignore_index) {
  const at::Tensor y = flat_labels(logits, labels, "logits");
  return at::cross_entropy_loss(logits.to(at::kFloat).reshape({-1, logits.size(-1)}), y,
                                /*weight=*/{}, at::Reduction::Sum, ignore_index);
}

at::Tensor cross_entropy_loss(const at::Tensor& logits, const at::Tensor& labels,
                              int64_t ignore_index) {
  return divide_by_count(cross_entropy_sum(logits, labels, ignore_index), labels, ignore_index);
}

at::Tensor linear_cross_entropy_sum(const at::Tensor& hidden, const at::Tensor& weight,
                                    const at::Tensor& labels, int64_t ignore_index,
                                    int64_t chunk_rows) {
  const at::Tensor y = flat_labels(hidden, labels, "hidden");
  TITAN_CHECK(weight.dim() == 2 && weight.size(1) == hidden.size(-1),
              "loss: output weight of shape ", shape_string(weight.sizes()),
              " does not match hidden of shape ", shape_string(hidden.sizes()));
  const int64_t vocab = weight.size(0);
  // One host check instead of an opaque gather error (or a device assert on CUDA).
  const bool out_of_range = ((y != ignore_index) & ((y < 0) | (y >= vocab))).any().item<bool>();
  TITAN_CHECK(!out_of_range, "loss: a label is outside [0, ", vocab,
              ") and is not the ignore index ", ignore_index);
  const at::Tensor h = hidden.reshape({-1, hidden.size(-1)});
  at::Tensor loss = LinearCrossEntropyFunction::apply(h, weight, y, ignore_index, chunk_rows);
  return loss;
}

at::Tensor linear_cross_entropy_loss(const at::Tensor& hidden, const at::Tensor& weight,
                                     const at::Tensor& labels, int64_t ignore_index,
                                     int64_t chunk_rows) {
  return divide_by_count(linear_cross_entropy_sum(hidden, weight, labels, ignore_index, chunk_rows),
                         labels, ignore_index);
}

}  // namespace titan::train
