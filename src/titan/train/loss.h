// Cross-entropy losses for causal LM training. Labels come already shifted (torchtitan's
// convention: labels[t] is the target of position t); positions labelled ignore_index (-100)
// do not count. Softmax / logsumexp run in float32 whatever the logits dtype.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace titan::train {

constexpr int64_t kIgnoreIndex = -100;

// Sum of the cross-entropy over the valid targets: logits [N, V] or [B, S, V], labels [N] or
// [B, S] (int64). Equal to F.cross_entropy(logits.float(), labels, reduction="sum").
at::Tensor cross_entropy_sum(const at::Tensor& logits, const at::Tensor& labels,
                             int64_t ignore_index = kIgnoreIndex);
// The mean over valid targets: cross_entropy_sum / their number (a batch without valid
// targets gives 0 rather than torch's NaN, so it cannot poison an accumulated step).
at::Tensor cross_entropy_loss(const at::Tensor& logits, const at::Tensor& labels,
                              int64_t ignore_index = kIgnoreIndex);

// cross_entropy_sum(hidden @ weight^T, labels) without materialising the [N, V] logits:
// hidden [N, H] or [B, S, H], weight [V, H]. Rows are processed in chunks (chunk_rows; 0 picks
// Liger-Kernel's size, about N*H/V rows); the forward pass also computes the gradients with
// respect to hidden and weight chunk by chunk, and backward only scales them by the incoming
// gradient. The matmuls run in hidden's dtype (weight is cast to it), softmax in float32; the
// weight gradient is accumulated in float32 and returned in weight's dtype.
at::Tensor linear_cross_entropy_sum(const at::Tensor& hidden, const at::Tensor& weight,
                                    const at::Tensor& labels, int64_t ignore_index = kIgnoreIndex,
                                    int64_t chunk_rows = 0);
// linear_cross_entropy_sum / the number of valid targets (0 when there are none).
at::Tensor linear_cross_entropy_loss(const at::Tensor& hidden, const at::Tensor& weight,
                                     const at::Tensor& labels, int64_t ignore_index = kIgnoreIndex,
                                     int64_t chunk_rows = 0);

// Number of labels != ignore_index: as an int64 scalar tensor on labels' device (no host
// synchronisation), or as a host number.
at::Tensor valid_token_count(const at::Tensor& labels, int64_t ignore_index = kIgnoreIndex);
int64_t count_valid_tokens(const at::Tensor& labels, int64_t ignore_index = kIgnoreIndex);

}  // namespace titan::train
