// The forward and backward of a DPO step (training.objective dpo; docs/preference.md): for each
// micro-batch of pairs, the reference's forward (no gradient; reference_weights.h) and the
// policy's, each row's completion log-probability summed over its labels (the negated token
// cross-entropy, through the same head and loss kernel as language-model training, the
// vocabulary-parallel one under tensor parallelism), then the DPO loss (dpo_loss.h) as this
// micro-batch's share of the step's, and its backward. The step's metric sums (dpo_metric_sums)
// are kept for the log. Under context parallelism each rank holds a part of every row (both
// sequences of a pair alike): the rows' sums are added up over cp before the loss, which every
// cp rank then computes whole (pair_logps). With a precomputed table of the reference's
// log-probabilities (dpo.precompute_reference; precompute()) the reference's forward is a look-up
// instead.
#pragma once

#include "titan/data/batch_source.h"
#include "titan/train/context_parallel_batch.h"
#include "titan/train/forward_backward.h"
#include "titan/train/preference/dpo_loss.h"
#include "titan/train/preference/reference_weights.h"

namespace titan::train {

// Each row's summed label log-probability (float32 [rows], with the model's gradient): the
// negated cross-entropy of hidden [rows, T, H] against labels [rows, T] (labels on the host).
at::Tensor sequence_logps(const CausalLmLoss& loss, const at::Tensor& hidden,
                          const at::Tensor& labels);

class DpoForwardBackward : public ForwardBackward {
 public:
  // All must outlive this. `step_pairs`: the pairs of a step over every rank.
  DpoForwardBackward(models::Model& model, const CausalLmLoss& loss,
                     distributed::MeshContext& parallel, const NamedTensors& params,
                     at::Device device, DpoSettings settings, ReferenceWeights& reference,
                     int64_t step_pairs);
  // Returns this rank's part of the step's DPO loss (float64 [1]); `scale` gives the auxiliary
  // loss's divisor and the non-finite test hook.
  at::Tensor run(const std::vector<data::Batch>& batches, const StepScale& scale) override;
  // Validation batches are language-model batches: their token cross-entropy.
  std::pair<double, double> evaluate(const data::Batch& batch) override;

  // The reference's log-probabilities of every record that makes a pair (float64 [records, 2]:
  // chosen, rejected; 0 for the others), from `pairs` read in file order up to the end of its
  // first epoch, each rank forwarding its own pairs (every rank the same number of batches),
  // the table summed over the batch ranks. The reference is the weights now, or with
  // `reference` given the weights it swaps in.
  at::Tensor precompute(data::BatchSource& pairs, int64_t records, ReferenceWeights* reference);
  // From now on the reference's log-probabilities are looked up in `table` (records x 2, on
  // the device; must outlive this) by each pair's record.
  void use_table(const at::Tensor* table) { table_ = table; }

  // This rank's sums of the last step's metrics (float64 [6] on the device, dpo_metric_names()).
  const at::Tensor& metric_sums() const { return metric_sums_; }

 private:
  models::Model& model_;
  const CausalLmLoss& loss_;
  distributed::MeshContext& parallel_;
  const NamedTensors& params_;
  at::Device device_;
  DpoSettings settings_;
  ReferenceWeights& reference_;
  int64_t step_pairs_;
  at::Tensor metric_sums_;
  const at::Tensor* table_ = nullptr;
  ContextParallelBatch cp_batch_;  // the precomputation's pairs, split as the trainer's

  // Each row's completion log-probability (sequence_logps), summed over the context-parallel
  // ranks' parts of the row.
  at::Tensor pair_logps(const at::Tensor& hidden, const at::Tensor& labels);
};

}  // namespace titan::train
