#include "titan/train/loss.h"

#include <string>

#include "titan/common/error.h"
#include "titan/common/strings.h"
#include "titan/kernels/override_resolver.h"
#include "titan/kernels/reference/reference.h"

namespace titan::train {
namespace {

// Checks that `rows` (logits or hidden, [..., D]) and labels agree and returns the labels
// flattened to [N].
at::Tensor flat_labels(const at::Tensor& rows, const at::Tensor& labels, const char* what) {
  TITAN_CHECK(rows.dim() == 2 || rows.dim() == 3, "loss: ", what,
              " must be [N, D] or [B, S, D], got ", shape_to_string(rows.sizes()));
  TITAN_CHECK(labels.sizes() == rows.sizes().slice(0, rows.dim() - 1), "loss: labels of shape ",
              shape_to_string(labels.sizes()), " do not match ", what, " of shape ",
              shape_to_string(rows.sizes()));
  TITAN_CHECK(labels.scalar_type() == at::kLong, "loss: labels must be int64, got ",
              labels.scalar_type());
  return labels.reshape({-1});
}

at::Tensor divide_by_count(const at::Tensor& sum, const at::Tensor& labels, int64_t ignore_index) {
  return sum / valid_token_count(labels, ignore_index).clamp_min(1).to(sum.scalar_type());
}

// Shapes and label range, checked once here for every implementation: one host check instead
// of an opaque gather error (or a device assert on CUDA). Labels on the host are checked there,
// which keeps the check from waiting for the device.
void check_head_inputs(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& y,
                       int64_t ignore_index) {
  TITAN_CHECK(weight.dim() == 2 && weight.size(1) == hidden.size(-1),
              "loss: output weight of shape ", shape_to_string(weight.sizes()),
              " does not match hidden of shape ", shape_to_string(hidden.sizes()));
  const int64_t vocab = weight.size(0);
  const bool out_of_range = ((y != ignore_index) & ((y < 0) | (y >= vocab))).any().item<bool>();
  TITAN_CHECK(!out_of_range, "loss: a label is outside [0, ", vocab,
              ") and is not the ignore index ", ignore_index);
}

}  // namespace

CausalLmLoss::CausalLmLoss(models::Model& model, kernels::OverrideResolver* overrides,
                           models::VocabParallelLoss vocab_parallel, int64_t vocabulary)
    : model_(model),
      vocab_parallel_(std::move(vocab_parallel)),
      vocabulary_(vocabulary),
      cross_entropy_(overrides != nullptr
                         ? overrides->function<kernels::Op::kCrossEntropy>("output")
                         : &kernels::reference::cross_entropy) {}

at::Tensor CausalLmLoss::sum(const at::Tensor& hidden, const at::Tensor& labels) const {
  const models::VocabParallelLoss& parallel = vocab_parallel_;
  if (!parallel)
    return linear_cross_entropy_sum(hidden, model_.output_weight(), labels, cross_entropy_);
  // Loss parallel: the head holds a part of the vocabulary; the labels are checked against all.
  const int64_t vocab = vocabulary_;
  const bool out_of_range =
      ((labels != kIgnoreIndex) & ((labels < 0) | (labels >= vocab))).any().item<bool>();
  TITAN_CHECK(!out_of_range, "loss: a label is outside [0, ", vocab,
              ") and is not the ignore index ", kIgnoreIndex);
  return parallel(hidden, model_.output_weight(), labels.to(hidden.device()), kIgnoreIndex);
}

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
                                    const at::Tensor& labels, kernels::CrossEntropyFn cross_entropy,
                                    int64_t ignore_index) {
  const at::Tensor y = flat_labels(hidden, labels, "hidden");
  check_head_inputs(hidden, weight, y, ignore_index);
  if (cross_entropy == nullptr) cross_entropy = &kernels::reference::cross_entropy;
  return cross_entropy(hidden.reshape({-1, hidden.size(-1)}), weight, y.to(hidden.device()),
                       ignore_index);
}

at::Tensor linear_cross_entropy_sum_chunked(const at::Tensor& hidden, const at::Tensor& weight,
                                            const at::Tensor& labels, int64_t ignore_index,
                                            int64_t chunk_rows) {
  const at::Tensor y = flat_labels(hidden, labels, "hidden");
  check_head_inputs(hidden, weight, y, ignore_index);
  return kernels::reference::linear_cross_entropy_sum(hidden.reshape({-1, hidden.size(-1)}), weight,
                                                      y.to(hidden.device()), ignore_index,
                                                      chunk_rows);
}

at::Tensor linear_cross_entropy_loss_chunked(const at::Tensor& hidden, const at::Tensor& weight,
                                             const at::Tensor& labels, int64_t ignore_index,
                                             int64_t chunk_rows) {
  return divide_by_count(
      linear_cross_entropy_sum_chunked(hidden, weight, labels, ignore_index, chunk_rows), labels,
      ignore_index);
}

}  // namespace titan::train
