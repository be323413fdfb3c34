// MeshContext: the ParallelContext (models/parallel_context.h) of a training run, over its
// device mesh. It owns what the parallelisms leave behind: the placement of every parameter
// (parameter_placements.h), the data-parallel wrapper (data_parallel.h) and the parameters
// whose gradients are partial sums over a mesh dimension, which the trainer completes after
// each step's backward; and the per-rank facts of the sequence: how context parallelism splits
// it (the batch sharding and the attention read the same shards) and how many of a row's
// tokens this rank's activations hold. Every parallelism plugs in here: a method of the
// ParallelContext interface implemented over the mesh's groups that records the placements it gives
// parameters (docs/distributed.md, "Adding a parallelism").
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>

#include "titan/distributed/data_parallel.h"
#include "titan/distributed/device_mesh.h"
#include "titan/distributed/parameter_placements.h"
#include "titan/distributed/sequence_shards.h"
#include "titan/models/parallel_context.h"

namespace titan::distributed {

// How a run splits its rows: their length (training.seq_len; 0 when not known: no shards are
// made and the attention lays out whatever length it gets), context parallelism's load
// balancer, and whether sequence parallelism splits the sequence over tp between the blocks.
struct SequenceOptions {
  int64_t seq_len = 0;
  LoadBalancer balancer = LoadBalancer::kHeadTail;
  bool sequence_parallel = false;
};

class MeshContext : public models::ParallelContext {
 public:
  MeshContext(std::unique_ptr<DeviceMesh> mesh, DataParallelOptions data_parallel,
              SequenceOptions sequence = {});

  int64_t purpose_size(const std::string& purpose) const override;
  int64_t purpose_rank(const std::string& purpose) const override;
  void all_reduce(const std::string& purpose, at::Tensor& tensor,
                  models::Reduction op = models::Reduction::kSum) override;
  int64_t degree(const std::string& mesh_dim) const override { return mesh_->size(mesh_dim); }
  int64_t coordinate(const std::string& mesh_dim) const override {
    return mesh_->coordinate(mesh_dim);
  }
  bool data_parallel() const override { return data_parallel_ != nullptr; }
  void fully_shard(const std::vector<models::Module*>& modules,
                   const models::ShardOptions& options) override;
  void distribute(const std::string& name, at::Tensor& slot, const std::string& mesh_dim,
                  int64_t dim) override;
  void sum_gradients_over(const std::string& name, const std::string& mesh_dim) override;
  models::TensorParallelHooks tensor_parallel_hooks(bool sequence_parallel) override;
  void use_vocab_parallel_head(int64_t vocab, bool sequence_parallel) override;
  kernels::ExpertGroup expert_group() override;
  models::ContextParallelAttention context_parallel_attention() override;

  const DeviceMesh& mesh() const { return *mesh_; }
  const ParallelDims& dims() const { return mesh_->dims(); }
  const ParameterPlacements& placements() const { return placements_; }
  // Context parallelism's split of a row of SequenceOptions::seq_len tokens; nullptr when cp is
  // 1 (or the length is not known).
  const SequenceShards* sequence_shards() const { return shards_ ? &*shards_ : nullptr; }
  // The tokens of a row of `seq_len` this rank's activations hold between the blocks: its part
  // of the sequence (÷ cp), split again over tp under sequence parallelism. The pipeline's
  // transfers, tokens per second and the memory estimate all count these.
  int64_t local_sequence(int64_t seq_len) const;
  // nullptr without data parallelism.
  DataParallel* data_parallel_wrapper() { return data_parallel_.get(); }

  // The loss over the head that parallelize left: the vocabulary-parallel loss and the whole
  // vocabulary's size when the head is split over tp (use_vocab_parallel_head), else unset.
  const models::VocabParallelLoss& vocab_parallel_loss() const { return vocab_loss_; }
  int64_t vocabulary() const { return vocabulary_; }

  // Pipeline parallelism, after parallelize: `tensors` (parameters and buffers, by name, as
  // this rank holds them) are this rank's stages' and are recorded as owned on pp, so that each
  // stage writes its own to checkpoints and counts its own in the gradient norm; those in
  // `written_by_first_stage` (the tied embedding a last stage holds as its head) are recorded
  // as replicas of the first stage's, which writes and counts them. Nothing without a pipeline.
  void hold_on_stage(const NamedTensors& tensors,
                     const std::set<std::string>& written_by_first_stage);
  // Once parallelize is done: every recorded placement also names the mesh dimensions of size
  // > 1 it is replicated over, so that exactly one rank writes each piece.
  void finish_placements();
  // Around each micro-batch's backward: before it, whether it is the step's last (data
  // parallelism sums over replicas only then); after it, the data-parallel reductions are
  // finished and, after the last, the gradients that are partial sums over a mesh dimension
  // (sum_gradients_over) are summed. `params` are the optimizer's (name, tensor) pairs.
  void start_backward(bool last);
  void finish_backward(bool last, const NamedTensors& params);
  // After forwards without a backward (validation): the parameters FSDP gathered are freed.
  void finish_forward_only() {
    if (data_parallel_) data_parallel_->finish_forward_only();
  }

 private:
  std::unique_ptr<DeviceMesh> mesh_;
  ParameterPlacements placements_;
  std::unique_ptr<DataParallel> data_parallel_;
  std::map<std::string, std::set<std::string>> partial_;  // mesh dim -> parameter names
  models::VocabParallelLoss vocab_loss_;
  int64_t vocabulary_ = 0;
  SequenceOptions sequence_;
  std::optional<SequenceShards> shards_;

  // The mesh group a reduction purpose spans.
  const std::string& group_of(const std::string& purpose) const;
  void sum_partial_gradients(const NamedTensors& params);
};

}  // namespace titan::distributed
