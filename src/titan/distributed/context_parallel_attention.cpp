#include "titan/distributed/context_parallel_attention.h"

#include <ATen/core/grad_mode.h>

#include "titan/common/error.h"
#include "titan/distributed/differentiable_collectives.h"

namespace titan::distributed {
namespace {

// What the layers of one model share: the layout of the current sequence length, and the
// gathered document ids of the current forward.
struct State {
  std::shared_ptr<Group> cp;
  LoadBalancer balancer;
  int64_t seq_len = -1;
  at::Tensor query_index;  // CPU int64 [S / cp]: this rank's tokens
  at::Tensor natural;      // int64 [S] on the device: gathered row of each token (undefined: same)
  at::Tensor local_ids;    // the last document ids seen, and theirs in sequence order
  at::Tensor sequence_ids;

  void use_length(int64_t seq_len_now, const at::Device& device) {
    if (seq_len_now == seq_len && (!natural.defined() || natural.device() == device)) return;
    const SequenceShards shards(seq_len_now, cp->size(), balancer);
    query_index = shards.indices_of(cp->rank());
    natural = shards.gathered_in_order() ? at::Tensor() : shards.natural_from_gathered().to(device);
    seq_len = seq_len_now;
  }

  // [B, S/cp] -> [B, S] of every rank's ids, in sequence order; once per forward.
  const at::Tensor& ids_of_sequence(const at::Tensor& ids) {
    if (local_ids.defined() && ids.is_same(local_ids)) return sequence_ids;
    at::NoGradGuard no_grad;
    at::Tensor all = at::cat(cp->all_gather(ids.contiguous()), 1);
    if (natural.defined()) all = all.index_select(1, natural.to(all.device()));
    local_ids = ids;
    sequence_ids = all;
    return sequence_ids;
  }
};

}  // namespace

models::ContextParallelAttention make_context_parallel_attention(std::shared_ptr<Group> cp,
                                                                 LoadBalancer balancer) {
  auto state = std::make_shared<State>();
  state->cp = std::move(cp);
  state->balancer = balancer;
  return [state](kernels::ContextAttentionFn attend, const at::Tensor& q, const at::Tensor& k,
                 const at::Tensor& v, double scale, const at::Tensor& document_ids) {
    TITAN_CHECK(attend != nullptr, "context parallelism: no context_attention kernel");
    const int64_t local = q.size(2), kv_heads = k.size(1);
    state->use_length(local * state->cp->size(), q.device());
    // One collective for both: [B, 2 nkv, S/cp, d] -> [B, 2 nkv, S, d] in rank order, then in
    // sequence order (a differentiable gather; its backward scatters the gradient back).
    at::Tensor gathered = all_gather_along(at::cat({k, v}, 1), 2, state->cp);
    if (state->natural.defined()) gathered = gathered.index_select(2, state->natural);
    const at::Tensor ids =
        document_ids.defined() ? state->ids_of_sequence(document_ids) : at::Tensor();
    return attend(q, gathered.narrow(1, 0, kv_heads), gathered.narrow(1, kv_heads, kv_heads), scale,
                  state->query_index, ids);
  };
}

}  // namespace titan::distributed
