#include "titan/distributed/vocab_parallel_loss.h"

#include <torch/csrc/autograd/custom_function.h>
#include <torch/custom_class.h>

#include <algorithm>
#include <limits>

namespace titan::distributed {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct GroupHolder : torch::CustomClassHolder {
  std::shared_ptr<Group> group;
};

// Rows per chunk: one chunk of float32 logits near 256 MB, as the chunked loss.
int64_t chunk_rows(int64_t rows, int64_t vocab) {
  constexpr int64_t kLogitElementsPerChunk = int64_t{1} << 26;
  return std::clamp<int64_t>(kLogitElementsPerChunk / std::max<int64_t>(vocab, 1), 1,
                             std::max<int64_t>(rows, 1));
}

struct VocabParallelCrossEntropy : torch::autograd::Function<VocabParallelCrossEntropy> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& hidden,
                            const at::Tensor& weight, const at::Tensor& labels, int64_t begin,
                            int64_t real, int64_t ignore_index, c10::IValue holder) {
    Group& group = *static_cast<GroupHolder*>(holder.toCapsule().get())->group;
    const int64_t n = hidden.size(0), rows_here = weight.size(0);
    const bool grad_hidden = hidden.requires_grad(), grad_weight = weight.requires_grad();
    const at::Tensor w = weight.to(hidden.scalar_type());
    at::Tensor loss = at::zeros({}, hidden.options().dtype(at::kFloat));
    at::Tensor d_hidden = grad_hidden ? at::empty_like(hidden) : at::Tensor();
    at::Tensor d_weight =
        grad_weight ? at::zeros(weight.sizes(), weight.options().dtype(at::kFloat)) : at::Tensor();
    const int64_t step = chunk_rows(n, rows_here);
    for (int64_t start = 0; start < n; start += step) {
      const int64_t rows = std::min(step, n - start);
      const at::Tensor h = hidden.narrow(0, start, rows);
      const at::Tensor y = labels.narrow(0, start, rows);
      const at::Tensor valid = y != ignore_index;
      at::Tensor logits = at::matmul(h, w.t()).to(at::kFloat);  // [rows, rows_here]
      if (real < rows_here)  // the padding rows of the head are no vocabulary entry
        logits.narrow(1, real, rows_here - real).fill_(-std::numeric_limits<float>::infinity());
      at::Tensor max = std::get<0>(logits.max(1, /*keepdim=*/true));
      group.all_reduce(max, ReduceOp::kMax);
      // The target's logit from the rank that holds it (0 elsewhere), summed with the row sums
      // of exponentials in one all-reduce.
      const at::Tensor local = y - begin;
      const at::Tensor here = valid & (local >= 0) & (local < real);
      const at::Tensor index = at::where(here, local, 0).unsqueeze(1);
      at::Tensor exps = (logits - max).exp_();
      at::Tensor sums =
          at::stack({exps.sum(1), at::where(here, logits.gather(1, index).squeeze(1), 0)});
      group.all_reduce(sums);
      const at::Tensor log_z = sums[0].log();
      const at::Tensor token_loss = log_z + max.squeeze(1) - sums[1];
      loss.add_(at::where(valid, token_loss, 0).sum());
      if (!grad_hidden && !grad_weight) continue;
      // d(loss)/d(logits) = softmax - one_hot(target), zero on ignored rows.
      at::Tensor g = exps.div_(sums[0].unsqueeze(1));
      g.scatter_add_(1, index, at::where(here, -1.0f, 0.0f).unsqueeze(1).to(g.scalar_type()));
      g.mul_(valid.unsqueeze(1));
      const at::Tensor gc = g.to(hidden.scalar_type());
      if (grad_hidden) {
        at::Tensor out = d_hidden.narrow(0, start, rows);
        at::mm_out(out, gc, w);
      }
      if (grad_weight) d_weight.add_(at::mm(gc.t(), h).to(at::kFloat));
    }
    if (grad_weight) d_weight = d_weight.to(weight.scalar_type());
    ctx->save_for_backward({d_hidden, d_weight});
    return loss;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& g = grad_outputs[0];
    auto scaled = [&](const at::Tensor& grad) {
      return grad.defined() ? grad * g.to(grad.scalar_type()) : at::Tensor();
    };
    return {scaled(saved[0]), scaled(saved[1]), at::Tensor(), at::Tensor(),
            at::Tensor(),     at::Tensor(),     at::Tensor()};
  }
};

}  // namespace

at::Tensor vocab_parallel_cross_entropy(const at::Tensor& hidden, const at::Tensor& weight,
                                        const at::Tensor& labels, int64_t begin, int64_t real,
                                        int64_t ignore_index, std::shared_ptr<Group> group) {
  auto holder = c10::make_intrusive<GroupHolder>();
  holder->group = std::move(group);
  return VocabParallelCrossEntropy::apply(hidden, weight, labels, begin, real, ignore_index,
                                          c10::IValue::make_capsule(std::move(holder)));
}

}  // namespace titan::distributed
