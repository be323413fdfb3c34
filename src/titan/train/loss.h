// The training loss: summed token cross-entropy over the valid labels. Labels come already
// shifted (torchtitan's convention: labels[t] is the target of position t); positions labelled
// ignore_index (-100) do not count. Softmax / logsumexp run in float32 whatever the logits dtype.
//
// CausalLmLoss is the component the trainer and `titan eval` use: built once, with the
// cross_entropy implementation chosen for the call site "output" (the head and the loss are one
// overridable op, so that the [tokens, vocab] logits need never exist) and the model whose
// output_weight() it reads at each call.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

#include "titan/kernels/ops.h"
#include "titan/models/model.h"

namespace titan::kernels {
class OverrideResolver;
}

namespace titan::train {

constexpr int64_t kIgnoreIndex = -100;

class CausalLmLoss {
 public:
  // `overrides` picks the cross_entropy implementation at "output" (nullptr: reference). With
  // `vocab_parallel` set (the head split over tensor-parallel ranks: what parallelize left in
  // the parallel context) the loss goes through it, over a vocabulary of `vocabulary` rows.
  CausalLmLoss(models::Model& model, kernels::OverrideResolver* overrides,
               models::VocabParallelLoss vocab_parallel = {}, int64_t vocabulary = 0);

  // Summed cross-entropy of hidden [B, S, H] (or [N, H]) against labels [B, S] (or [N]), with
  // the model's head. Labels outside the vocabulary (other than -100) are a titan::Error. The
  // labels may be on the CPU with hidden on a device: they are checked there and then moved
  // (the trainer does this, so that the check does not synchronise with the device).
  at::Tensor sum(const at::Tensor& hidden, const at::Tensor& labels) const;

 private:
  models::Model& model_;
  models::VocabParallelLoss vocab_parallel_;
  int64_t vocabulary_ = 0;
  kernels::CrossEntropyFn cross_entropy_;
};

// Sum of the cross-entropy over the valid targets: logits [N, V] or [B, S, V], labels [N] or
// [B, S] (int64). Equal to F.cross_entropy(logits.float(), labels, reduction="sum").
at::Tensor cross_entropy_sum(const at::Tensor& logits, const at::Tensor& labels,
                             int64_t ignore_index = kIgnoreIndex);
// The mean over valid targets: cross_entropy_sum / their number (a batch without valid
// targets gives 0 rather than torch's NaN, so it cannot poison an accumulated step).
at::Tensor cross_entropy_loss(const at::Tensor& logits, const at::Tensor& labels,
                              int64_t ignore_index = kIgnoreIndex);

// cross_entropy_sum(hidden @ weight^T, labels) through `cross_entropy` (an implementation of the
// op; reference when null), after checking shapes and label range: hidden [N, H] or [B, S, H],
// weight [V, H], labels on hidden's device or on the CPU.
at::Tensor linear_cross_entropy_sum(const at::Tensor& hidden, const at::Tensor& weight,
                                    const at::Tensor& labels,
                                    kernels::CrossEntropyFn cross_entropy = nullptr,
                                    int64_t ignore_index = kIgnoreIndex);
// The reference implementation with an explicit chunk size (rows per chunk; 0 = automatic),
// and its mean over the valid targets (0 when there are none).
at::Tensor linear_cross_entropy_sum_chunked(const at::Tensor& hidden, const at::Tensor& weight,
                                            const at::Tensor& labels, int64_t ignore_index,
                                            int64_t chunk_rows);
at::Tensor linear_cross_entropy_loss_chunked(const at::Tensor& hidden, const at::Tensor& weight,
                                             const at::Tensor& labels, int64_t ignore_index,
                                             int64_t chunk_rows);

// Number of labels != ignore_index: as an int64 scalar tensor on labels' device (no host
// synchronisation), or as a host number.
at::Tensor valid_token_count(const at::Tensor& labels, int64_t ignore_index = kIgnoreIndex);
int64_t count_valid_tokens(const at::Tensor& labels, int64_t ignore_index = kIgnoreIndex);

}  // namespace titan::train
