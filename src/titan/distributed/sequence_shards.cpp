#include "titan/distributed/sequence_shards.h"

#include <vector>

#include "titan/common/error.h"
#include "titan/config/validate.h"

namespace titan::distributed {

LoadBalancer parse_load_balancer(const std::string& name) {
  config::check_one_of("parallelism.context_parallel_load_balancer", name, {"headtail", "none"});
  return name == "none" ? LoadBalancer::kNone : LoadBalancer::kHeadTail;
}

const char* load_balancer_name(LoadBalancer balancer) {
  return balancer == LoadBalancer::kNone ? "none" : "headtail";
}

int64_t sequence_chunks(int64_t cp, LoadBalancer balancer) {
  return balancer == LoadBalancer::kHeadTail ? 2 * cp : cp;
}

SequenceShards::SequenceShards(int64_t seq_len, int64_t cp, LoadBalancer balancer)
    : seq_len_(seq_len), cp_(cp), balancer_(balancer) {
  TITAN_CHECK(cp >= 1, "context parallelism: degree ", cp);
  const int64_t chunks = sequence_chunks(cp, balancer);
  TITAN_CHECK(cp == 1 || (seq_len > 0 && seq_len % chunks == 0), "training.seq_len = ", seq_len,
              " does not split into ", chunks, " equal chunks (",
              balancer == LoadBalancer::kHeadTail ? "2 x " : "",
              "parallelism.context_parallel_degree = ", cp,
              ", parallelism.context_parallel_load_balancer = ", load_balancer_name(balancer),
              "); make it a multiple of ", chunks);
}

at::Tensor SequenceShards::indices_of(int64_t rank) const {
  TITAN_CHECK(rank >= 0 && rank < cp_, "context parallelism: rank ", rank, " of ", cp_);
  const int64_t local = local_len();
  if (balancer_ == LoadBalancer::kNone || cp_ == 1)
    return at::arange(rank * local, (rank + 1) * local, at::kLong);
  const int64_t chunk = local / 2;
  return at::cat({at::arange(rank * chunk, (rank + 1) * chunk, at::kLong),
                  at::arange((2 * cp_ - 1 - rank) * chunk, (2 * cp_ - rank) * chunk, at::kLong)});
}

at::Tensor SequenceShards::gathered_order() const {
  std::vector<at::Tensor> parts;
  for (int64_t r = 0; r < cp_; ++r) parts.push_back(indices_of(r));
  return at::cat(parts);
}

at::Tensor SequenceShards::natural_from_gathered() const { return at::argsort(gathered_order()); }

}  // namespace titan::distributed
