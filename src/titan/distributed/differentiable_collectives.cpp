#include "titan/distributed/differentiable_collectives.h"

#include <torch/csrc/autograd/custom_function.h>
#include <torch/custom_class.h>

#include <numeric>

#include "titan/common/error.h"

namespace titan::distributed {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// What a backward needs: the group, and the dimension or split sizes of the forward.
struct Holder : torch::CustomClassHolder {
  std::shared_ptr<Group> group;
  int64_t dim = 0;
  std::vector<int64_t> receive, send;
};

c10::IValue hold(std::shared_ptr<Group> group, int64_t dim = 0, std::vector<int64_t> receive = {},
                 std::vector<int64_t> send = {}) {
  auto h = c10::make_intrusive<Holder>();
  h->group = std::move(group);
  h->dim = dim;
  h->receive = std::move(receive);
  h->send = std::move(send);
  return c10::IValue::make_capsule(std::move(h));
}

Holder& held(AutogradContext* ctx) {
  return *static_cast<Holder*>(ctx->saved_data["group"].toCapsule().get());
}

at::Tensor summed(const at::Tensor& x, const Holder& h) {
  at::Tensor out = x.contiguous().clone();
  h.group->all_reduce(out);
  return out;
}

at::Tensor identity(const at::Tensor& x, const Holder&) {
  return x;  // returned as is: autograd hands out a view of it with this node as grad_fn
}

at::Tensor passed_on(const at::Tensor& g, const Holder&) { return g; }

// Concatenation on h.dim of every member's x.
at::Tensor gathered(const at::Tensor& x, const Holder& h) {
  Group& group = *h.group;
  const at::Tensor front = x.movedim(h.dim, 0).contiguous();
  std::vector<int64_t> shape = front.sizes().vec();
  shape[0] *= group.size();
  std::vector<at::Tensor> outputs{at::empty(shape, front.options())};
  std::vector<at::Tensor> inputs{front};
  group.all_gather_async(outputs, inputs).wait();
  return outputs[0].movedim(0, h.dim).contiguous();
}

// The sum over members, this member's slice on h.dim.
at::Tensor scattered(const at::Tensor& x, const Holder& h) {
  Group& group = *h.group;
  TITAN_CHECK(x.size(h.dim) % group.size() == 0, "reduce-scatter over group ", group.name(), ": ",
              x.size(h.dim), " entries on dimension ", h.dim, " do not divide over ", group.size(),
              " ranks");
  const at::Tensor front = x.movedim(h.dim, 0).contiguous();
  std::vector<int64_t> shape = front.sizes().vec();
  shape[0] /= group.size();
  std::vector<at::Tensor> outputs{at::empty(shape, front.options())};
  std::vector<at::Tensor> inputs{front};
  group.reduce_scatter_async(outputs, inputs).wait();
  return outputs[0].movedim(0, h.dim).contiguous();
}

at::Tensor own_slice(const at::Tensor& x, const Holder& h) {
  Group& group = *h.group;
  TITAN_CHECK(x.size(h.dim) % group.size() == 0, "split over group ", group.name(), ": ",
              x.size(h.dim), " entries on dimension ", h.dim, " do not divide over ", group.size(),
              " ranks");
  const int64_t part = x.size(h.dim) / group.size();
  return x.narrow(h.dim, group.rank() * part, part).contiguous();
}

at::Tensor exchange(const at::Tensor& rows, const std::vector<int64_t>& receive,
                    const std::vector<int64_t>& send, Group& group) {
  at::Tensor input = rows.contiguous();
  std::vector<int64_t> shape = input.sizes().vec();
  shape[0] = std::accumulate(receive.begin(), receive.end(), int64_t{0});
  at::Tensor output = at::empty(shape, input.options());
  group.all_to_all(output, input, receive, send);
  return output;
}

at::Tensor exchanged(const at::Tensor& rows, const Holder& h) {
  return exchange(rows, h.receive, h.send, *h.group);
}

// The gradients go back where their rows came from.
at::Tensor exchanged_back(const at::Tensor& grads, const Holder& h) {
  return exchange(grads, h.send, h.receive, *h.group);
}

// A collective and the one its backward runs, as an autograd function.
using Collective = at::Tensor (*)(const at::Tensor&, const Holder&);

template <Collective Forward, Collective Backward>
struct Paired : torch::autograd::Function<Paired<Forward, Backward>> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, c10::IValue holder) {
    ctx->saved_data["group"] = holder;
    return Forward(x, *static_cast<Holder*>(holder.toCapsule().get()));
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    return {Backward(g[0], held(ctx)), at::Tensor()};
  }
};

using CopyTo = Paired<identity, summed>;
using SumOver = Paired<summed, passed_on>;
using GatherAlong = Paired<gathered, scattered>;
using ReduceScatterAlong = Paired<scattered, gathered>;
using SplitAlong = Paired<own_slice, gathered>;
using GatherSplitAlong = Paired<gathered, own_slice>;
using AllToAllRows = Paired<exchanged, exchanged_back>;

int64_t positive_dim(const at::Tensor& x, int64_t dim) { return dim < 0 ? dim + x.dim() : dim; }

}  // namespace

at::Tensor copy_to_group(const at::Tensor& x, const std::shared_ptr<Group>& group) {
  if (group->size() == 1) return x;
  return CopyTo::apply(x, hold(group));
}

at::Tensor sum_over_group(const at::Tensor& x, const std::shared_ptr<Group>& group) {
  if (group->size() == 1) return x;
  return SumOver::apply(x, hold(group));
}

at::Tensor all_gather_along(const at::Tensor& x, int64_t dim, const std::shared_ptr<Group>& group) {
  if (group->size() == 1) return x;
  return GatherAlong::apply(x, hold(group, positive_dim(x, dim)));
}

at::Tensor reduce_scatter_along(const at::Tensor& x, int64_t dim,
                                const std::shared_ptr<Group>& group) {
  if (group->size() == 1) return x;
  return ReduceScatterAlong::apply(x, hold(group, positive_dim(x, dim)));
}

at::Tensor split_along(const at::Tensor& x, int64_t dim, const std::shared_ptr<Group>& group) {
  if (group->size() == 1) return x;
  return SplitAlong::apply(x, hold(group, positive_dim(x, dim)));
}

at::Tensor gather_split_along(const at::Tensor& x, int64_t dim,
                              const std::shared_ptr<Group>& group) {
  if (group->size() == 1) return x;
  return GatherSplitAlong::apply(x, hold(group, positive_dim(x, dim)));
}

at::Tensor all_to_all_rows(const at::Tensor& rows, const std::vector<int64_t>& receive,
                           const std::vector<int64_t>& send, const std::shared_ptr<Group>& group) {
  TITAN_CHECK(static_cast<int64_t>(receive.size()) == group->size() &&
                  static_cast<int64_t>(send.size()) == group->size(),
              "all_to_all on group ", group->name(), ": one split size per member expected");
  if (group->size() == 1) return rows;
  return AllToAllRows::apply(rows, hold(group, 0, receive, send));
}

}  // namespace titan::distributed
