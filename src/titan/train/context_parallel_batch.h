// Context parallelism's split of each batch (docs/distributed.md, "Context parallelism"). Every
// cp rank of a data-parallel rank loads the same rows (the data loader's row rank is the
// data-parallel one); right after loading, each keeps its tokens of them, as
// distributed/sequence_shards.h lays them out: the inputs, the labels, the positions (RoPE
// rotates by a token's place in the whole row, or in its document when rows are packed) and the
// document ids (block-causal attention). The loss of a rank's part is then the sum over its own
// labels, and the "loss" reduction (dp x cp) sums the parts.
#pragma once

#include "titan/config/trainer_config.h"
#include "titan/data/data_loader.h"
#include "titan/distributed/mesh_context.h"
#include "titan/distributed/sequence_shards.h"

namespace titan::train {

// The config's checks, before anything is built: training.seq_len splits into the load
// balancer's chunks, and with sequence parallelism a rank's part of a row splits over tp; one
// error each, naming both numbers.
void check_context_parallel(const config::TrainerConfig& cfg);

class ContextParallelBatch {
 public:
  // The shards `parallel` made of a row, and this rank's place on cp.
  explicit ContextParallelBatch(const distributed::MeshContext& parallel);

  // This rank's part of `batch` (rows of training.seq_len tokens, or preference pairs padded to
  // a multiple of the balancer's chunks); the batch itself when cp is 1.
  data::Batch shard(const data::Batch& batch) const;

 private:
  const distributed::SequenceShards* shards_ = nullptr;
  int64_t rank_ = 0;  // this rank's place on cp
  at::Tensor mine_;   // int64 [S / cp]: the rank's tokens of a training.seq_len row
};

}  // namespace titan::train
