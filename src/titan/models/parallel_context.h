// ParallelContext: what a model spec's parallelize step (model_spec.h) may apply to a built
// model, as torchtitan's parallelize_fn applies fully_shard and friends from outside. The
// distributed room implements it over the device mesh (distributed/mesh_context.h); a model
// family's parallelize knows only this header, so models/ never includes distributed/.
//
// Mesh dimensions are named as in docs/distributed.md: "dp_replicate", "dp_shard", "dp",
// "cp", "tp", "pp", "ep", "efsdp", "dp_cp", "dp_shard_cp". On one process every degree is 1 and
// every call is the identity.
//
// Reductions are asked for by purpose, never by mesh group (torchtitan's named meshes), so that
// a new parallelism changes what a purpose spans, not its callers:
//   "batch"           the ranks that read different rows of a step (data parallelism);
//   "loss"            the ranks whose token counts and losses make up the step's loss (the
//                     batch ranks; with context parallelism also the cp ranks of each);
//   "layer_replicas"  the ranks that hold the same layers (all of them, or one pipeline
//                     stage's), over which per-layer statistics such as the expert-bias
//                     counts are summed;
//   "pipeline"        the ranks that hold the stages of the same rows (pp), over which each
//                     stage's part of a loss is summed;
//   "world"           every rank (agreeing to stop).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "titan/kernels/ops.h"
#include "titan/models/module.h"

namespace titan::models {

struct ShardOptions {
  // FSDP frees the unit's gathered parameters after its forward (and gathers them again for
  // its backward); false keeps them until the backward (torchtitan's reshard_after_forward).
  bool reshard_after_forward = true;
  // Which parameters are expert weights: FSDP shards those over efsdp (what expert parallelism
  // leaves of dp_shard x cp x tp) instead of dp_shard. Unset: none.
  std::function<bool(const std::string& name)> expert;
};

// The collectives a tensor-parallel model calls at the edges of its parallel regions
// (Megatron's f and g), so that the model code never names a process group. Each is
// differentiable; on one rank, or without tensor parallelism, the hooks are unset.
struct TensorParallelHooks {
  using Fn = std::function<at::Tensor(const at::Tensor&)>;
  int64_t degree = 1;
  int64_t rank = 0;
  bool sequence_parallel = false;
  // Before the column-parallel linears (and the vocabulary-parallel loss): the identity, with
  // the gradients summed over tp in backward; with sequence parallelism, [B, S/T, H] -> [B, S, H]
  // all-gathered (gradients reduce-scattered back).
  Fn enter;
  // After the row-parallel linears (and the vocabulary-parallel embedding): partial sums summed
  // over tp; with sequence parallelism, [B, S, H] -> [B, S/T, H] reduce-scattered.
  Fn exit;
  // Without sequence parallelism, the MoE layers' tokens [N, H] (the same on every tp rank) are
  // split over tp, each rank routing N/T of them, and gathered back after.
  Fn split_tokens;
  Fn gather_tokens;
  bool active() const { return static_cast<bool>(enter); }
};

// Context parallelism (cp > 1): how a layer's attention reaches the rest of the sequence. The
// rank holds its tokens' q/k/v [B, heads, S/cp, d] (the sequence split as the batch was,
// distributed/sequence_shards.h) and `document_ids` [B, S/cp] (undefined for causal rows); the
// function all-gathers k and v over cp (its backward reduce-scatters their gradients), puts
// them in sequence order and runs `attend` (the layer's context_attention op) with the global
// indices of the rank's queries -> [B, nq, S/cp, d].
using ContextParallelAttention = std::function<at::Tensor(
    kernels::ContextAttentionFn attend, const at::Tensor& q, const at::Tensor& k,
    const at::Tensor& v, double scale, const at::Tensor& document_ids)>;

// The loss over a head split on the vocabulary over tp (torchtitan's loss parallel): the sum of
// the cross-entropy of hidden @ weight^T over the valid labels, where `weight` holds this rank's
// rows of the vocabulary and `hidden` is as the model's final norm returns it.
using VocabParallelLoss =
    std::function<at::Tensor(const at::Tensor& hidden, const at::Tensor& weight,
                             const at::Tensor& labels, int64_t ignore_index)>;

enum class Reduction { kSum, kMax };

class ParallelContext {
 public:
  virtual ~ParallelContext() = default;

  // The ranks of a reduction purpose (above), and this rank's index among them; throws naming
  // an unknown purpose.
  virtual int64_t purpose_size(const std::string& purpose) const = 0;
  virtual int64_t purpose_rank(const std::string& purpose) const = 0;
  // Reduces `tensor` in place over a purpose's ranks (nothing when it has one rank).
  virtual void all_reduce(const std::string& purpose, at::Tensor& tensor,
                          Reduction op = Reduction::kSum) = 0;

  // Ranks on a mesh dimension, and this rank's place on it; throws naming an unknown one.
  virtual int64_t degree(const std::string& mesh_dim) const = 0;
  virtual int64_t coordinate(const std::string& mesh_dim) const = 0;
  // Whether data parallelism is on (dp_replicate x dp_shard > 1, or context parallelism, whose
  // ranks FSDP treats as more shards): fully_shard does something.
  virtual bool data_parallel() const = 0;

  // Makes `modules` (in forward order) one data-parallel unit: with dp_shard x cp > 1 (FSDP,
  // context parallelism folded in as torchtitan does) their parameters are sharded together on
  // dim 0 over dp_shard x cp, all-gathered before the first of them runs and freed again after
  // its forward (when options say so) and after its backward, and their gradients
  // reduce-scattered (summed: each cp rank's are its tokens' share); with dp_replicate > 1 (DDP, or
  // HSDP's outer dimension) their gradients are all-reduced over dp_replicate once the step's last
  // backward is done. Call once per unit, in forward order, after activation checkpointing (the
  // data-parallel wrapper then sits outside it). Nothing when data_parallel() is false.
  virtual void fully_shard(const std::vector<Module*>& modules, const ShardOptions& options) = 0;

  // Tensor and expert parallelism: replaces the whole tensor in `slot` (parameter `name`) by
  // this rank's piece of it, split on tensor dimension `dim` over `mesh_dim` (evenly, the last
  // pieces zero-padded), and records the placement. Call before fully_shard.
  virtual void distribute(const std::string& name, at::Tensor& slot, const std::string& mesh_dim,
                          int64_t dim) = 0;
  // Parameters replicated over `mesh_dim` whose gradients are partial sums there (a norm whose
  // input tensor parallelism splits): their gradients are summed over it at the end of each
  // step's backward.
  virtual void sum_gradients_over(const std::string& name, const std::string& mesh_dim) = 0;
  // The hooks of tensor parallelism over tp.
  virtual TensorParallelHooks tensor_parallel_hooks(bool sequence_parallel) = 0;
  // The model's head holds this rank's rows of a vocabulary of `vocab` (split over tp): the
  // loss the trainer builds after parallelize goes through the vocabulary-parallel loss
  // (torchtitan's loss parallel).
  virtual void use_vocab_parallel_head(int64_t vocab, bool sequence_parallel) = 0;
  // The expert group (ep) for the MoE layers' token exchange.
  virtual kernels::ExpertGroup expert_group() = 0;
  // Context parallelism over cp, the sequence split as the batch was (the run's load
  // balancer); one function for every layer. Unset when cp is 1.
  virtual ContextParallelAttention context_parallel_attention() = 0;
};

}  // namespace titan::models
