#include "titan/train/preference/dpo_forward_backward.h"

#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <limits>
#include <utility>

#include "titan/common/error.h"
#include "titan/distributed/differentiable_collectives.h"
#include "titan/distributed/mesh_context.h"
#include "titan/train/batch_loss.h"
#include "titan/train/loader_options.h"

namespace titan::train {

namespace {

// The columns [begin, end) of a row of labels (host, [T]) from its first label that counts to
// its last; [0, 1) when none counts (the row's sum is then 0).
std::pair<int64_t, int64_t> label_span(const at::Tensor& row) {
  const int64_t* y = row.data_ptr<int64_t>();
  const int64_t T = row.size(0);
  int64_t begin = 0, end = T;
  while (begin < T && y[begin] == kIgnoreIndex) ++begin;
  if (begin == T) return {0, 1};
  while (y[end - 1] == kIgnoreIndex) --end;
  return {begin, end};
}

}  // namespace

at::Tensor sequence_logps(const CausalLmLoss& loss, const at::Tensor& hidden,
                          const at::Tensor& labels) {
  // Only the columns that hold a row's completion go through the head: the prompt before it
  // and the padding after it (about half of a row) would cost their [T, vocabulary] logits,
  // and in the policy's forward their gradient, only to be zeroed. Under sequence parallelism
  // hidden holds a part of each row (fewer columns than labels), which the loss gathers: the
  // whole row then.
  const bool whole_rows = hidden.dim() != 3 || hidden.size(1) != labels.size(1);
  const at::Tensor host = labels.to(at::kCPU).contiguous();
  std::vector<at::Tensor> rows;
  for (int64_t i = 0; i < labels.size(0); ++i) {
    const auto [begin, end] =
        whole_rows ? std::pair<int64_t, int64_t>{0, labels.size(1)} : label_span(host[i]);
    // One row at a time, [1, columns, H]: a sum per row.
    rows.push_back(-loss.sum(hidden.slice(0, i, i + 1).slice(1, begin, end),
                             labels.slice(0, i, i + 1).slice(1, begin, end)));
  }
  return at::stack(rows).to(at::kFloat);
}

DpoForwardBackward::DpoForwardBackward(models::Model& model, const CausalLmLoss& loss,
                                       distributed::MeshContext& parallel,
                                       const NamedTensors& params, at::Device device,
                                       DpoSettings settings, ReferenceWeights& reference,
                                       int64_t step_pairs)
    : model_(model),
      loss_(loss),
      parallel_(parallel),
      params_(params),
      device_(device),
      settings_(std::move(settings)),
      reference_(reference),
      step_pairs_(step_pairs),
      cp_batch_(parallel) {}

at::Tensor DpoForwardBackward::pair_logps(const at::Tensor& hidden, const at::Tensor& labels) {
  const at::Tensor mine = sequence_logps(loss_, hidden, labels);
  if (parallel_.degree("cp") == 1) return mine;
  // Under context parallelism every row, the chosen and the rejected of each pair alike, is
  // split over the cp ranks: each holds a part of every sequence, never a whole one. The parts'
  // sums add up to the sequence's, and every cp rank then computes the same DPO loss from the
  // same totals. The gradient passes back unchanged to each rank's part, and the data-parallel
  // reduction sums the parts' gradients over cp, which gives the whole sequence's.
  return distributed::sum_over_group(mine, parallel_.mesh().group("cp"));
}

at::Tensor DpoForwardBackward::run(const std::vector<data::Batch>& batches,
                                   const StepScale& scale) {
  const at::TensorOptions dbl = at::TensorOptions(device_).dtype(at::kDouble);
  // The sft term's divisor: the chosen completions' tokens of the whole step.
  double step_chosen_tokens = 1;
  if (std::count(settings_.loss_types.begin(), settings_.loss_types.end(), "sft") > 0) {
    int64_t mine = 0;
    for (const data::Batch& b : batches) mine += chosen_label_tokens(b.labels);
    at::Tensor total = at::full({1}, static_cast<double>(mine), dbl);
    parallel_.all_reduce("loss", total);  // a cp rank counts its part of each row
    step_chosen_tokens = std::max(1.0, total.item<double>());
  }
  const int64_t cp_ranks = parallel_.degree("cp");
  at::Tensor loss_sum = at::zeros({1}, dbl);
  metric_sums_ = at::zeros({static_cast<int64_t>(dpo_metric_names().size())}, dbl);
  for (size_t i = 0; i < batches.size(); ++i) {
    const data::Batch& b = batches[i];
    TITAN_CHECK(b.completion_tokens.defined(), "DPO: a batch without preference pairs");
    const at::Tensor inputs = b.inputs.to(device_);
    const models::PackedDocuments documents = packed_documents(b, device_);
    at::Tensor reference;
    if (table_ != nullptr) {
      const at::Tensor rows = table_->index_select(0, b.pair_records.to(device_));
      reference = at::cat({rows.select(1, 0), rows.select(1, 1)}).to(at::kFloat);
    } else {
      reference_.with_reference([&] {
        reference = pair_logps(model_.forward_packed(inputs, documents).hidden, b.labels);
        parallel_.finish_forward_only();  // FSDP's units may keep their gathered values
      });
    }
    const bool last = i + 1 == batches.size();
    parallel_.start_backward(last);
    const models::ModelOutput out = model_.forward_packed(inputs, documents);
    const PairLogps logps{pair_logps(out.hidden, b.labels), reference,
                          b.completion_tokens.to(device_)};
    const at::Tensor dpo =
        dpo_loss_share(logps, settings_, static_cast<double>(step_pairs_), step_chosen_tokens);
    at::Tensor loss = dpo;
    at::Tensor extra;
    if (out.extra_loss.defined()) loss = loss + (extra = out.extra_loss / scale.extra_scale);
    if (scale.poison) loss = loss * std::numeric_limits<double>::quiet_NaN();
    loss.backward();
    parallel_.finish_backward(last, params_);
    // The step's loss is summed over the "loss" ranks (dp x cp): each cp rank holds the whole
    // DPO term (counted once over them) and its own tokens' part of the auxiliary loss.
    at::Tensor reported = dpo.detach().to(at::kDouble) / static_cast<double>(cp_ranks);
    if (extra.defined()) reported = reported + extra.detach().to(at::kDouble);
    if (scale.poison) reported = reported * std::numeric_limits<double>::quiet_NaN();
    loss_sum.add_(reported);
    metric_sums_.add_(dpo_metric_sums(logps, settings_.beta));
  }
  return loss_sum;
}

at::Tensor DpoForwardBackward::precompute(data::BatchSource& pairs, int64_t records,
                                          ReferenceWeights* reference) {
  const at::TensorOptions dbl = at::TensorOptions(device_).dtype(at::kDouble);
  at::Tensor sums = at::zeros({records, 2}, dbl), counts = at::zeros({records}, dbl);
  const auto forward = [&](const data::Batch& b) {
    at::NoGradGuard no_grad;
    const at::Tensor logps = pair_logps(
        model_.forward_packed(b.inputs.to(device_), packed_documents(b, device_)).hidden, b.labels);
    parallel_.finish_forward_only();
    return logps;
  };
  // Every rank reads the same global batches, so every rank stops after the same one. A record
  // read twice (the last global batch running into the next epoch) is averaged.
  while (true) {
    const nlohmann::json at = pairs.state();
    if (at["epoch"].get<int64_t>() > 0 || at["record"].get<int64_t>() >= records) break;
    const data::Batch b = cp_batch_.shard(pairs.next());
    at::Tensor logps;
    if (reference != nullptr)
      reference->with_reference([&] { logps = forward(b); });
    else
      logps = forward(b);
    const int64_t P = logps.size(0) / 2;
    const at::Tensor index = b.pair_records.to(device_);
    sums.index_add_(0, index,
                    at::stack({logps.slice(0, 0, P), logps.slice(0, P)}, 1).to(at::kDouble));
    counts.index_add_(0, index, at::ones({P}, dbl));
  }
  parallel_.all_reduce("batch", sums);
  parallel_.all_reduce("batch", counts);
  return sums / counts.clamp_min(1).unsqueeze(1);
}

std::pair<double, double> DpoForwardBackward::evaluate(const data::Batch& batch) {
  const BatchLoss b = batch_loss(model_, loss_, batch, device_);
  return {b.loss_sum.item<double>(), static_cast<double>(b.tokens)};
}

}  // namespace titan::train
