// Expert parallelism's token exchange (ops moe_dispatch, moe_combine): each token's k rows are
// sorted by expert, sent to the rank of the expert group that holds that expert (an all-to-all
// of the counts first, then of the rows), and grouped there by local expert; combine runs the
// same exchange backwards and sums each token's k outputs by its router weights. The experts
// themselves stay a separate op (moe_experts), run on the local experts.
#include <ATen/core/grad_mode.h>

#include "titan/common/error.h"
#include "titan/kernels/reference/reference.h"

namespace titan::kernels::reference {
namespace {

std::vector<int64_t> to_vector(const at::Tensor& t) {
  const at::Tensor c = t.to(at::kCPU, at::kLong).contiguous();
  return {c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel()};
}

}  // namespace

DispatchedTokens moe_dispatch(const at::Tensor& x, const Routing& routing, int64_t num_experts,
                              const ExpertGroup& group) {
  TITAN_CHECK(group.size >= 1 && num_experts % group.size == 0, "moe_dispatch: ", num_experts,
              " experts over an expert group of ", group.size);
  const int64_t top_k = routing.top_experts.size(1), local = num_experts / group.size;
  DispatchedTokens d;
  at::Tensor counts;  // [E] rows for each expert, from this rank
  {
    at::NoGradGuard no_grad;
    const at::Tensor flat = routing.top_experts.reshape({-1});
    d.sent_order = std::get<1>(at::sort(flat, /*stable=*/true, /*dim=*/0, /*descending=*/false));
    counts = at::bincount(flat, {}, num_experts).to(at::kLong);
  }
  // The experts of member m are [m * local, (m + 1) * local): its rows are consecutive.
  const at::Tensor send_counts = counts.view({group.size, local});
  d.sent = to_vector(send_counts.sum(1));
  const at::Tensor rows = x.index_select(0, at::div(d.sent_order, top_k, "floor"));
  at::Tensor received_counts = send_counts;  // [members, local] from each member
  at::Tensor received = rows;
  if (group.size > 1) {
    received_counts = group.exchange_counts(counts).view({group.size, local});
    d.received = to_vector(received_counts.sum(1));
    received = group.all_to_all(rows, d.received, d.sent);
  } else {
    d.received = d.sent;
  }
  // Received rows come by member, then expert; the local experts want them by expert.
  at::Tensor local_expert;
  {
    at::NoGradGuard no_grad;
    const at::Tensor ids =
        at::arange(local, received_counts.options()).repeat({group.size});  // [members*local]
    local_expert = at::repeat_interleave(ids, received_counts.reshape({-1}).to(ids.device()));
    d.received_order =
        std::get<1>(at::sort(local_expert, /*stable=*/true, /*dim=*/0, /*descending=*/false));
  }
  d.rows = received.index_select(0, d.received_order.to(received.device()));
  d.local_routing.top_experts = local_expert.index_select(0, d.received_order).unsqueeze(1);
  d.local_routing.top_weights = at::ones({d.rows.size(0), 1}, x.options().requires_grad(false));
  return d;
}

at::Tensor moe_combine(const at::Tensor& expert_rows, const DispatchedTokens& d,
                       const Routing& routing, const ExpertGroup& group) {
  const int64_t num_tokens = routing.top_experts.size(0), top_k = routing.top_experts.size(1);
  at::Tensor inverse_received, inverse_sent;
  {
    at::NoGradGuard no_grad;
    inverse_received = at::empty_like(d.received_order);
    inverse_received.scatter_(0, d.received_order,
                              at::arange(d.received_order.size(0), d.received_order.options()));
    inverse_sent = at::empty_like(d.sent_order);
    inverse_sent.scatter_(0, d.sent_order,
                          at::arange(d.sent_order.size(0), d.sent_order.options()));
  }
  // Back to the order received, then to the ranks the rows came from, in the order sent.
  at::Tensor rows = expert_rows.index_select(0, inverse_received.to(expert_rows.device()));
  if (group.size > 1) rows = group.all_to_all(rows, d.sent, d.received);
  const at::Tensor by_slot = rows.index_select(0, inverse_sent.to(rows.device()));  // [T*k, H]
  const at::Tensor weights = routing.top_weights.reshape({-1, 1}).to(by_slot.scalar_type());
  return (by_slot * weights).view({num_tokens, top_k, -1}).sum(1);
}

}  // namespace titan::kernels::reference
