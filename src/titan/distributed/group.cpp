#include "titan/distributed/group.h"

#include <torch/csrc/distributed/c10d/Work.hpp>

#include "titan/common/error.h"
#include "titan/distributed/group_impl.h"

namespace titan::distributed {
namespace {

// What a Pending holds: the c10d work and what to say when it fails.
struct InFlight {
  c10::intrusive_ptr<c10d::Work> work;
  std::string what;  // "all_gather on group shard (rank 1 of 2)"
  std::function<std::string()> diagnose;
  std::chrono::milliseconds timeout{0};  // 0: the backend's
  std::vector<at::Tensor> keep;          // what a send reads until it is done
};

c10d::ReduceOp to_c10d(ReduceOp op) {
  switch (op) {
    case ReduceOp::kMax:
      return c10d::ReduceOp::MAX;
    case ReduceOp::kMin:
      return c10d::ReduceOp::MIN;
    default:
      return c10d::ReduceOp::SUM;
  }
}

[[noreturn]] void fail_collective(const std::string& what,
                                  const std::function<std::string()>& diagnose,
                                  const std::string& why) {
  std::string who = diagnose ? diagnose() : std::string();
  fail(what, " failed", who.empty() ? std::string() : ": " + who, " (", why, ")");
}

}  // namespace

void Group::Pending::wait() {
  if (!state_) return;
  auto* flight = static_cast<InFlight*>(state_.get());
  try {
    if (flight->timeout.count() > 0) {
      flight->work->wait(flight->timeout);
    } else {
      flight->work->wait();
    }
  } catch (const std::exception& e) {
    const std::string what = flight->what;
    auto diagnose = flight->diagnose;
    state_.reset();
    fail_collective(what, diagnose, e.what());
  }
  state_.reset();
}

std::shared_ptr<Group> Group::solo(const std::string& name) {
  auto impl = std::make_unique<Impl>();
  impl->name = name;
  impl->global_ranks = {0};
  return std::make_shared<Group>(std::move(impl));
}

Group::Group(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Group::~Group() {
  if (impl_ && impl_->backend) {
    try {
      impl_->backend->shutdown();
    } catch (...) {
      // Shutting down after a failed peer may throw again; the first error was reported.
    }
  }
}

const std::string& Group::name() const { return impl_->name; }
int64_t Group::rank() const { return impl_->rank; }
int64_t Group::size() const { return static_cast<int64_t>(impl_->global_ranks.size()); }
const std::vector<int64_t>& Group::global_ranks() const { return impl_->global_ranks; }

namespace {

// `timeout` (0: the backend's) bounds the wait; `keep` stays alive until the work is done.
template <class Launch>
Group::Pending launch(const Group::Impl& g, const char* op, Launch&& start,
                      std::chrono::milliseconds timeout = {}, std::vector<at::Tensor> keep = {}) {
  auto flight = std::make_shared<InFlight>();
  flight->timeout = timeout;
  flight->keep = std::move(keep);
  flight->what = std::string(op) + " on group " + g.name + " (rank " + std::to_string(g.rank) +
                 " of " + std::to_string(g.global_ranks.size()) + ")";
  flight->diagnose = g.diagnose;
  try {
    flight->work = start();
  } catch (const std::exception& e) {
    fail_collective(flight->what, g.diagnose, e.what());
  }
  return Group::Pending(std::static_pointer_cast<void>(flight));
}

}  // namespace

Group::Pending Group::all_gather_async(std::vector<at::Tensor>& outputs,
                                       std::vector<at::Tensor>& inputs) {
  TITAN_CHECK(outputs.size() == inputs.size(), "all_gather: ", outputs.size(), " outputs for ",
              inputs.size(), " inputs");
  if (!impl_->backend) {
    for (size_t i = 0; i < inputs.size(); ++i) outputs[i].copy_(inputs[i]);
    return {};
  }
  return launch(*impl_, "all_gather", [&] {
    if (inputs.size() == 1) return impl_->backend->_allgather_base(outputs[0], inputs[0]);
    return impl_->backend->allgather_into_tensor_coalesced(outputs, inputs);
  });
}

Group::Pending Group::reduce_scatter_async(std::vector<at::Tensor>& outputs,
                                           std::vector<at::Tensor>& inputs) {
  TITAN_CHECK(outputs.size() == inputs.size(), "reduce_scatter: ", outputs.size(), " outputs for ",
              inputs.size(), " inputs");
  if (!impl_->backend) {
    for (size_t i = 0; i < inputs.size(); ++i) outputs[i].copy_(inputs[i]);
    return {};
  }
  return launch(*impl_, "reduce_scatter", [&] {
    c10d::ReduceScatterOptions options;
    options.reduceOp = c10d::ReduceOp::SUM;
    if (inputs.size() == 1)
      return impl_->backend->_reduce_scatter_base(outputs[0], inputs[0], options);
    return impl_->backend->reduce_scatter_tensor_coalesced(outputs, inputs, options);
  });
}

Group::Pending Group::all_reduce_async(std::vector<at::Tensor>& tensors, ReduceOp op) {
  if (!impl_->backend || tensors.empty()) return {};
  return launch(*impl_, "all_reduce", [&] {
    c10d::AllreduceOptions options;
    options.reduceOp = to_c10d(op);
    if (tensors.size() == 1) return impl_->backend->allreduce(tensors, options);
    c10d::AllreduceCoalescedOptions coalesced;
    coalesced.reduceOp = to_c10d(op);
    return impl_->backend->allreduce_coalesced(tensors, coalesced);
  });
}

Group::Pending Group::all_to_all_async(at::Tensor& output, at::Tensor& input,
                                       const std::vector<int64_t>& output_splits,
                                       const std::vector<int64_t>& input_splits) {
  const size_t n = impl_->global_ranks.size();
  TITAN_CHECK((output_splits.empty() || output_splits.size() == n) &&
                  (input_splits.empty() || input_splits.size() == n),
              "all_to_all on group ", impl_->name, ": split sizes must have one entry per member (",
              n, ")");
  if (!impl_->backend) {
    output.copy_(input);
    return {};
  }
  return launch(*impl_, "all_to_all", [&] {
    std::vector<int64_t> out_splits = output_splits, in_splits = input_splits;
    c10d::AllToAllOptions options;
    return impl_->backend->alltoall_base(output, input, out_splits, in_splits, options);
  });
}

void Group::all_to_all(at::Tensor& output, at::Tensor& input,
                       const std::vector<int64_t>& output_splits,
                       const std::vector<int64_t>& input_splits) {
  all_to_all_async(output, input, output_splits, input_splits).wait();
}

std::vector<at::Tensor> Group::all_gather(const at::Tensor& input) {
  const int64_t n = size();
  std::vector<int64_t> shape = input.sizes().vec();
  shape.insert(shape.begin(), n);
  std::vector<at::Tensor> outputs{at::empty(shape, input.options())};
  std::vector<at::Tensor> inputs{input.contiguous().unsqueeze(0)};
  all_gather_async(outputs, inputs).wait();
  std::vector<at::Tensor> out;
  for (int64_t m = 0; m < n; ++m) out.push_back(outputs[0][m]);
  return out;
}

void Group::all_reduce(std::vector<at::Tensor>& tensors, ReduceOp op) {
  all_reduce_async(tensors, op).wait();
}

void Group::all_reduce(at::Tensor& tensor, ReduceOp op) {
  std::vector<at::Tensor> one{tensor};
  all_reduce(one, op);
}

void Group::broadcast(at::Tensor& tensor, int64_t root) {
  if (!impl_->backend) return;
  std::vector<at::Tensor> one{tensor};
  launch(*impl_, "broadcast", [&] {
    c10d::BroadcastOptions options;
    options.rootRank = root;
    return impl_->backend->broadcast(one, options);
  }).wait();
}

void Group::barrier() {
  if (!impl_->backend) return;
  launch(*impl_, "barrier", [&] { return impl_->backend->barrier(); }).wait();
}

void Group::set_timeout(std::chrono::milliseconds timeout) {
  impl_->timeout = timeout;
  if (impl_->backend) impl_->backend->setTimeout(timeout);
}

namespace {

// The tag of every point-to-point transfer: pairs are matched by their order (group.h).
constexpr int kPointToPointTag = 0;

void check_peer(const Group::Impl& g, int64_t peer, const char* op) {
  TITAN_CHECK(g.backend != nullptr, op, " on group ", g.name,
              ": a group of one process has no peer to exchange with");
  TITAN_CHECK(peer >= 0 && peer < static_cast<int64_t>(g.global_ranks.size()) && peer != g.rank, op,
              " on group ", g.name, " (rank ", g.rank, " of ", g.global_ranks.size(), "): no peer ",
              peer);
}

}  // namespace

Group::Pending Group::send_async(const at::Tensor& tensor, int64_t peer) {
  check_peer(*impl_, peer, "send");
  std::vector<at::Tensor> one{tensor.contiguous()};
  const std::string op = "send to rank " + std::to_string(impl_->global_ranks[peer]);
  return launch(
      *impl_, op.c_str(),
      [&] { return impl_->backend->send(one, static_cast<int>(peer), kPointToPointTag); },
      impl_->timeout, one);
}

Group::Pending Group::recv_async(at::Tensor& tensor, int64_t peer) {
  check_peer(*impl_, peer, "receive");
  TITAN_CHECK(tensor.is_contiguous(), "receive on group ", impl_->name,
              ": the buffer must be contiguous");
  std::vector<at::Tensor> one{tensor};
  const std::string op = "receive from rank " + std::to_string(impl_->global_ranks[peer]);
  return launch(
      *impl_, op.c_str(),
      [&] { return impl_->backend->recv(one, static_cast<int>(peer), kPointToPointTag); },
      impl_->timeout);
}

}  // namespace titan::distributed
