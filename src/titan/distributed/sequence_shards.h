// How context parallelism splits a sequence of S tokens over cp ranks (torchtitan's load
// balancers, docs/distributed.md "Context parallelism"):
//
//   headtail  the sequence is cut into 2 x cp chunks of S / (2 cp) tokens; rank r holds chunks r
//             and 2cp - 1 - r, so that under causal attention every rank has the same work (an
//             early chunk sees few keys, its partner near the end many). S=8, cp=2:
//             rank 0 {0,1, 6,7}, rank 1 {2,3, 4,5}.
//   none      rank r holds the r-th of cp contiguous pieces.
//
// A rank's tokens are kept in that order (its head chunk, then its tail chunk), and an
// all-gather over the cp ranks concatenates every rank's in rank order: gathered_order() says
// which token each gathered row is. Pure index arithmetic: every rank computes the same answers.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>

namespace titan::distributed {

enum class LoadBalancer { kHeadTail, kNone };

// "headtail" or "none" (parallelism.context_parallel_load_balancer); throws naming the value.
LoadBalancer parse_load_balancer(const std::string& name);
const char* load_balancer_name(LoadBalancer balancer);

// Chunks a sequence is cut into: 2 x cp under headtail, cp under none.
int64_t sequence_chunks(int64_t cp, LoadBalancer balancer);

class SequenceShards {
 public:
  // Throws naming training.seq_len and the chunks when `seq_len` does not split into them.
  SequenceShards(int64_t seq_len, int64_t cp, LoadBalancer balancer);

  int64_t seq_len() const { return seq_len_; }
  int64_t degree() const { return cp_; }
  int64_t local_len() const { return seq_len_ / cp_; }
  LoadBalancer balancer() const { return balancer_; }
  // int64 [S / cp] on the CPU: the global token indices rank `rank` holds, in its order.
  at::Tensor indices_of(int64_t rank) const;
  // int64 [S]: every rank's indices in rank order (what an all-gather of the shards holds).
  at::Tensor gathered_order() const;
  // int64 [S]: where token t lies in the gathered order (its inverse permutation).
  at::Tensor natural_from_gathered() const;
  // Whether the gathered order is the sequence's own (none): no reordering needed.
  bool gathered_in_order() const { return balancer_ == LoadBalancer::kNone || cp_ == 1; }

 private:
  int64_t seq_len_, cp_;
  LoadBalancer balancer_;
};

}  // namespace titan::distributed
