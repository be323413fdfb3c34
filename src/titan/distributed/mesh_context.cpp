#include "titan/distributed/mesh_context.h"

#include <ATen/core/grad_mode.h>

#include <algorithm>

#include "titan/common/error.h"
#include "titan/distributed/context_parallel_attention.h"
#include "titan/distributed/differentiable_collectives.h"
#include "titan/distributed/vocab_parallel_loss.h"

namespace titan::distributed {

MeshContext::MeshContext(std::unique_ptr<DeviceMesh> mesh, DataParallelOptions data_parallel,
                         SequenceOptions sequence)
    : mesh_(std::move(mesh)), sequence_(sequence) {
  if (mesh_->size("cp") > 1 && sequence_.seq_len > 0)
    shards_.emplace(sequence_.seq_len, mesh_->size("cp"), sequence_.balancer);
  // Data parallelism, or the FSDP of expert weights over efsdp that tensor or expert
  // parallelism alone may need (the tp ranks route different tokens to the same experts), or
  // context parallelism (FSDP over dp_shard x cp: its ranks compute shares of every gradient).
  if (mesh_->dims().data_parallel() || mesh_->dims().efsdp() > 1 || mesh_->dims().cp > 1)
    data_parallel_ = std::make_unique<DataParallel>(*mesh_, placements_, data_parallel);
}

void MeshContext::fully_shard(const std::vector<models::Module*>& modules,
                              const models::ShardOptions& options) {
  if (data_parallel_) data_parallel_->wrap(modules, options);
}

void MeshContext::distribute(const std::string& name, at::Tensor& slot, const std::string& mesh_dim,
                             int64_t dim) {
  const int64_t size = mesh_->size(mesh_dim);
  if (size == 1) return;
  TITAN_CHECK(dim >= 0 && dim < slot.dim(), "distribute: parameter ", name, " has ", slot.dim(),
              " dimensions, no dimension ", dim);
  const TensorPlacement* before = placements_.find(name);
  TITAN_CHECK(before == nullptr, "distribute: parameter ", name,
              " is already split; tensor and expert parallelism split a parameter once, before "
              "data parallelism");
  const TensorPlacement placement{
      slot.sizes().vec(), {{mesh_dim, size, mesh_->coordinate(mesh_dim), Placement::shard(dim)}}};
  at::NoGradGuard no_grad;
  const bool grad = slot.requires_grad();
  slot = local_piece(placement, slot.detach()).requires_grad_(grad);
  placements_.set(name, placement);
}

void MeshContext::sum_gradients_over(const std::string& name, const std::string& mesh_dim) {
  if (mesh_->size(mesh_dim) > 1) partial_[mesh_dim].insert(name);
}

models::TensorParallelHooks MeshContext::tensor_parallel_hooks(bool sequence_parallel) {
  models::TensorParallelHooks hooks;
  const std::shared_ptr<Group> tp = mesh_->group("tp");
  hooks.degree = tp->size();
  hooks.rank = tp->rank();
  hooks.sequence_parallel = sequence_parallel;
  if (tp->size() == 1) return hooks;
  if (sequence_parallel) {
    hooks.enter = [tp](const at::Tensor& x) { return all_gather_along(x, 1, tp); };
    hooks.exit = [tp](const at::Tensor& x) { return reduce_scatter_along(x, 1, tp); };
  } else {
    hooks.enter = [tp](const at::Tensor& x) { return copy_to_group(x, tp); };
    hooks.exit = [tp](const at::Tensor& x) { return sum_over_group(x, tp); };
    hooks.split_tokens = [tp](const at::Tensor& x) { return split_along(x, 0, tp); };
    hooks.gather_tokens = [tp](const at::Tensor& x) { return gather_split_along(x, 0, tp); };
  }
  return hooks;
}

const std::string& MeshContext::group_of(const std::string& purpose) const {
  // The rows are data parallelism's; the loss also the cp ranks' (each holds a part of every
  // row); the ranks of one pipeline stage (all of them without a pipeline) hold the same
  // layers; the pipeline's ranks hold a row's stages.
  static const std::map<std::string, std::string> groups = {{"batch", "dp"},
                                                            {"loss", "dp_cp"},
                                                            {"layer_replicas", "stage"},
                                                            {"pipeline", "pp"},
                                                            {"world", "world"}};
  const auto it = groups.find(purpose);
  TITAN_CHECK(it != groups.end(), "no reduction purpose '", purpose,
              "' (batch, loss, layer_replicas, pipeline, world)");
  return it->second;
}

int64_t MeshContext::purpose_size(const std::string& purpose) const {
  return mesh_->size(group_of(purpose));
}

int64_t MeshContext::purpose_rank(const std::string& purpose) const {
  return mesh_->coordinate(group_of(purpose));
}

void MeshContext::all_reduce(const std::string& purpose, at::Tensor& tensor, models::Reduction op) {
  Group& group = (*mesh_)[group_of(purpose)];
  if (group.size() == 1) return;
  group.all_reduce(tensor, op == models::Reduction::kMax ? ReduceOp::kMax : ReduceOp::kSum);
}

void MeshContext::start_backward(bool last) {
  if (data_parallel_) data_parallel_->set_gradient_sync(last);
}

void MeshContext::finish_backward(bool last, const NamedTensors& params) {
  if (data_parallel_) data_parallel_->finish_backward();
  if (last) sum_partial_gradients(params);
}

void MeshContext::use_vocab_parallel_head(int64_t vocab, bool sequence_parallel) {
  vocabulary_ = vocab;
  const std::shared_ptr<Group> tp = mesh_->group("tp");
  const EvenSplit rows = even_split(vocab, tp->size(), tp->rank());
  const models::TensorParallelHooks hooks = tensor_parallel_hooks(sequence_parallel);
  vocab_loss_ = [tp, rows, enter = hooks.enter](const at::Tensor& hidden, const at::Tensor& weight,
                                                const at::Tensor& labels, int64_t ignore_index) {
    // Every rank needs every token's hidden state for its rows of the vocabulary.
    const at::Tensor h = enter ? enter(hidden) : hidden;
    return vocab_parallel_cross_entropy(h.reshape({-1, h.size(-1)}), weight, labels.reshape({-1}),
                                        rows.begin, rows.real, ignore_index, tp);
  };
}

models::ContextParallelAttention MeshContext::context_parallel_attention() {
  if (mesh_->size("cp") == 1) return {};
  return make_context_parallel_attention(mesh_->group("cp"), sequence_.balancer);
}

int64_t MeshContext::local_sequence(int64_t seq_len) const {
  const int64_t tp = mesh_->size("tp");
  return seq_len / mesh_->size("cp") / (sequence_.sequence_parallel && tp > 1 ? tp : 1);
}

kernels::ExpertGroup MeshContext::expert_group() {
  const std::shared_ptr<Group> ep = mesh_->group("ep");
  kernels::ExpertGroup group;
  group.size = ep->size();
  group.rank = ep->rank();
  if (ep->size() == 1) return group;
  group.all_to_all = [ep](const at::Tensor& rows, const std::vector<int64_t>& receive,
                          const std::vector<int64_t>& send) {
    return all_to_all_rows(rows, receive, send, ep);
  };
  group.exchange_counts = [ep](const at::Tensor& counts) {
    at::Tensor input = counts.contiguous();
    at::Tensor output = at::empty_like(input);
    ep->all_to_all(output, input);
    return output;
  };
  return group;
}

void MeshContext::hold_on_stage(const NamedTensors& tensors,
                                const std::set<std::string>& written_by_first_stage) {
  const int64_t pp = mesh_->size("pp");
  if (pp == 1) return;
  const int64_t stage = mesh_->coordinate("pp");
  for (const auto& [name, local] : tensors) {
    const TensorPlacement* before = placements_.find(name);
    const TensorPlacement placement = before ? *before : TensorPlacement{local.sizes().vec(), {}};
    // A copy of the first stage's tensor is a replica on pp whose index is not 0: it is
    // neither written nor counted in the gradient norm (the first stage's is).
    const Placement on_pp = written_by_first_stage.count(name) > 0 && stage != 0
                                ? Placement::replicate()
                                : Placement::owned();
    placements_.set(name, placement.then({"pp", pp, stage, on_pp}));
  }
}

void MeshContext::finish_placements() {
  // The mesh dimensions a tensor lies over: the dense ones, or for expert weights (split over
  // ep or sharded over efsdp) the expert ones; both tile the world.
  static const std::vector<std::string> dense = {"pp", "dp_replicate", "dp_shard", "cp", "tp"};
  static const std::vector<std::string> expert = {"pp", "dp_replicate", "efsdp", "ep"};
  // FSDP's shard group under context parallelism spans two of the dimensions.
  auto covers = [](const std::string& group, const std::string& dim) {
    return group == dim || (group == "dp_shard_cp" && (dim == "dp_shard" || dim == "cp"));
  };
  for (const auto& [name, placement] : placements_.all()) {
    const bool is_expert = std::any_of(placement.on.begin(), placement.on.end(), [](auto& on) {
      return on.mesh_dim == "ep" || on.mesh_dim == "efsdp";
    });
    TensorPlacement complete = placement;
    for (const std::string& dim : is_expert ? expert : dense) {
      const bool named = std::any_of(placement.on.begin(), placement.on.end(),
                                     [&](auto& on) { return covers(on.mesh_dim, dim); });
      if (named || mesh_->size(dim) == 1) continue;
      complete =
          complete.then({dim, mesh_->size(dim), mesh_->coordinate(dim), Placement::replicate()});
    }
    placements_.set(name, complete);
  }
}

void MeshContext::sum_partial_gradients(const NamedTensors& params) {
  at::NoGradGuard no_grad;
  for (const auto& [dim, names] : partial_) {
    std::vector<at::Tensor> grads;
    for (const auto& [name, p] : params) {
      if (!names.count(name)) continue;
      if (!p.grad().defined()) p.mutable_grad() = at::zeros_like(p);
      grads.push_back(p.grad());
    }
    if (!grads.empty()) (*mesh_)[dim].all_reduce(grads);
  }
}

}  // namespace titan::distributed
