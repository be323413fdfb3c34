// Group: a set of ranks and the collectives they run together, over a c10d backend (Gloo on
// the CPU, NCCL on GPUs). A group of one runs every collective as the identity, without a
// backend, so single-process code paths are the same code.
//
// Every failure (a timeout, a peer that went away) is a titan::Error naming the group, the
// collective and, when it can tell from the heartbeats in the store, the rank that stopped.
// Collectives must be called in the same order on every rank of the group, from one thread.
#pragma once

#include <ATen/ATen.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace titan::distributed {

enum class ReduceOp { kSum, kMax, kMin };

class Group {
 public:
  struct Impl;

  // An async collective in flight; wait() returns when it is done (or throws).
  class Pending {
   public:
    Pending() = default;
    explicit Pending(std::shared_ptr<void> state) : state_(std::move(state)) {}
    void wait();
    bool active() const { return state_ != nullptr; }

   private:
    std::shared_ptr<void> state_;
  };

  // The group of this process alone.
  static std::shared_ptr<Group> solo(const std::string& name);
  explicit Group(std::unique_ptr<Impl> impl);
  ~Group();
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  const std::string& name() const;
  int64_t rank() const;  // in this group
  int64_t size() const;
  const std::vector<int64_t>& global_ranks() const;  // global rank of each member

  // outputs[i] [size * n_i, ...] gets every member's inputs[i] [n_i, ...], in rank order.
  Pending all_gather_async(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs);
  // outputs[i] [n_i, ...] gets the sum over members of rows [rank*n_i, (rank+1)*n_i) of
  // inputs[i].
  Pending reduce_scatter_async(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs);
  Pending all_reduce_async(std::vector<at::Tensor>& tensors, ReduceOp op = ReduceOp::kSum);
  // output [sum(output_splits), ...] gets, in rank order, input_splits[rank] rows of every
  // member's input [sum(input_splits), ...] (rows sent to member m: its input_splits[m]).
  // Empty splits mean equal splits. Every member's output_splits[m] must equal what member m
  // sends it (exchange the counts first, with equal splits, when they are not known).
  Pending all_to_all_async(at::Tensor& output, at::Tensor& input,
                           const std::vector<int64_t>& output_splits = {},
                           const std::vector<int64_t>& input_splits = {});
  void all_to_all(at::Tensor& output, at::Tensor& input,
                  const std::vector<int64_t>& output_splits = {},
                  const std::vector<int64_t>& input_splits = {});
  // Every member's `input` (same shape and dtype on every member), in rank order.
  std::vector<at::Tensor> all_gather(const at::Tensor& input);

  void all_reduce(std::vector<at::Tensor>& tensors, ReduceOp op = ReduceOp::kSum);
  void all_reduce(at::Tensor& tensor, ReduceOp op = ReduceOp::kSum);
  void broadcast(at::Tensor& tensor, int64_t root);
  void barrier();

  // Point-to-point (pipeline parallelism): sends `tensor` (kept alive until the send is done)
  // to member `peer`, or receives into `tensor` from member `peer`. No shape travels: both sides
  // know it. Two members issue their transfers to each other in the same order (the n-th send
  // from one to the other meets the other's n-th receive from it), as a lowered pipeline
  // schedule does, so NCCL's blocking pairs cannot deadlock. A wait fails after the group's
  // timeout (or at once when the peer's connection drops), naming the group, the peer and the
  // rank that stopped.
  Pending send_async(const at::Tensor& tensor, int64_t peer);
  Pending recv_async(at::Tensor& tensor, int64_t peer);

  // The timeout of every later collective (the first ones use comm.init_timeout_seconds).
  void set_timeout(std::chrono::milliseconds timeout);

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace titan::distributed
