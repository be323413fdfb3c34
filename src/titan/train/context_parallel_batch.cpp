#include "titan/train/context_parallel_batch.h"

#include "titan/common/error.h"

namespace titan::train {

void check_context_parallel(const config::TrainerConfig& cfg) {
  const config::ParallelismConfig& p = cfg.parallelism;
  const distributed::LoadBalancer balancer =
      distributed::parse_load_balancer(p.context_parallel_load_balancer);
  const int64_t cp = p.context_parallel_degree, tp = p.tensor_parallel_degree;
  if (cp <= 1) return;
  const int64_t seq_len = cfg.training.seq_len;
  (void)distributed::SequenceShards{seq_len, cp, balancer};  // throws naming both numbers
  TITAN_CHECK(tp == 1 || !p.enable_sequence_parallel || (seq_len / cp) % tp == 0,
              "training.seq_len = ", seq_len, ": each context-parallel rank's ", seq_len / cp,
              " tokens (parallelism.context_parallel_degree = ", cp,
              ") do not split over parallelism.tensor_parallel_degree = ", tp,
              " with sequence parallelism; make training.seq_len a multiple of ",
              distributed::sequence_chunks(cp, balancer) * tp);
}

ContextParallelBatch::ContextParallelBatch(const distributed::MeshContext& parallel)
    : shards_(parallel.sequence_shards()) {
  if (shards_ == nullptr) return;
  rank_ = parallel.coordinate("cp");
  mine_ = shards_->indices_of(rank_);
}

data::Batch ContextParallelBatch::shard(const data::Batch& batch) const {
  if (!shards_) return batch;
  TITAN_CHECK(batch.inputs.dim() == 2, "context parallelism: rows [batch, tokens] expected, got ",
              batch.inputs.sizes());
  const int64_t rows = batch.inputs.size(0), length = batch.inputs.size(1);
  // Language-model rows are training.seq_len long; preference pairs are padded to their
  // longest row, a multiple of the balancer's chunks (preference_options.cpp), and split the same
  // way (the attention lays out whatever length it gets).
  const at::Tensor mine =
      length == shards_->seq_len()
          ? mine_
          : distributed::SequenceShards(length, shards_->degree(), shards_->balancer())
                .indices_of(rank_);
  auto part = [&](const at::Tensor& t) { return t.index_select(1, mine.to(t.device())); };
  data::Batch out;
  out.inputs = part(batch.inputs);
  out.labels = part(batch.labels);
  // Causal rows: a token's position is its place in the row.
  out.positions = batch.positions.defined() ? part(batch.positions)
                                            : mine.unsqueeze(0).expand({rows, -1}).contiguous();
  if (batch.document_ids.defined()) out.document_ids = part(batch.document_ids);
  out.positions_end = length;
  // A pair's facts are whole-row ones: every cp rank keeps them.
  out.completion_tokens = batch.completion_tokens;
  out.pair_records = batch.pair_records;
  return out;
}

}  // namespace titan::train
