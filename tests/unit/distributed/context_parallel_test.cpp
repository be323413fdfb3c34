// Context parallelism's pieces without torchrun: the sequence's split over cp ranks (head-tail
// and contiguous, torchtitan's indices), the mesh groups it adds, and the attention of
// ContextParallelAttention over a real Gloo group of two ranks (two threads of this process,
// each its own World) against one process's attention on the whole sequence, forward and
// backward: the all-gather of keys and values, their order, the gathered document ids and the
// reduce-scatter of their gradients.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <exception>
#include <thread>

#include "../error_of.h"
#include "../relative_error.h"
#include "titan/distributed/context_parallel_attention.h"
#include "titan/distributed/parallel_dims.h"
#include "titan/distributed/sequence_shards.h"
#include "titan/distributed/world.h"
#include "titan/kernels/registry.h"

namespace titan::distributed {
namespace {

using Ranks = std::vector<int64_t>;
using titan::testing::error_of;
using titan::testing::relative_error;

Ranks as_vector(const at::Tensor& t) {
  const at::Tensor c = t.contiguous();
  return Ranks(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

TEST(SequenceShards, HeadTailAndContiguousAsTorchtitanLaysThemOut) {
  // torchtitan's _HeadTailLoadBalancer: S=8, cp=2 -> rearrange [0,1,6,7 | 2,3,4,5].
  const SequenceShards headtail(8, 2, LoadBalancer::kHeadTail);
  EXPECT_EQ(as_vector(headtail.indices_of(0)), (Ranks{0, 1, 6, 7}));
  EXPECT_EQ(as_vector(headtail.indices_of(1)), (Ranks{2, 3, 4, 5}));
  EXPECT_EQ(as_vector(headtail.gathered_order()), (Ranks{0, 1, 6, 7, 2, 3, 4, 5}));
  const at::Tensor natural = headtail.natural_from_gathered();
  EXPECT_EQ(as_vector(headtail.gathered_order().index_select(0, natural)),
            (Ranks{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_FALSE(headtail.gathered_in_order());
  // PyTorch's docstring example, chunks of one token: [0,7 | 1,6 | 2,5 | 3,4].
  const SequenceShards four(8, 4, LoadBalancer::kHeadTail);
  EXPECT_EQ(as_vector(four.gathered_order()), (Ranks{0, 7, 1, 6, 2, 5, 3, 4}));
  const SequenceShards none(8, 2, LoadBalancer::kNone);
  EXPECT_EQ(as_vector(none.indices_of(1)), (Ranks{4, 5, 6, 7}));
  EXPECT_TRUE(none.gathered_in_order());
}

TEST(SequenceShards, ALengthThatDoesNotSplitNamesBothNumbers) {
  const std::string e = error_of([] { SequenceShards(20, 4, LoadBalancer::kHeadTail); });
  EXPECT_NE(e.find("training.seq_len = 20"), std::string::npos) << e;
  EXPECT_NE(e.find("parallelism.context_parallel_degree = 4"), std::string::npos) << e;
  EXPECT_NE(e.find("8 equal chunks"), std::string::npos) << e;
  // Contiguous pieces need cp chunks only.
  EXPECT_EQ(SequenceShards(20, 4, LoadBalancer::kNone).local_len(), 5);
  const std::string bad = error_of([] { parse_load_balancer("ptrr"); });
  EXPECT_NE(bad.find("parallelism.context_parallel_load_balancer"), std::string::npos) << bad;
}

TEST(MeshLayout, ContextParallelGroups) {
  // dp_shard 2 x cp 2 x tp 2: cp varies just outside tp.
  ParallelDims d;
  d.dp_shard = 2;
  d.cp = 2;
  d.tp = 2;
  d.world_size = 8;
  const MeshLayout mesh(d);
  EXPECT_EQ(mesh.members("cp", 5), (Ranks{5, 7}));
  EXPECT_EQ(mesh.members("dp", 5), (Ranks{1, 5}));
  // The loss is summed over dp x cp, FSDP shards over dp_shard x cp: both keep tp fixed.
  EXPECT_EQ(mesh.members("dp_cp", 5), (Ranks{1, 3, 5, 7}));
  EXPECT_EQ(mesh.members("dp_shard_cp", 5), (Ranks{1, 3, 5, 7}));
  EXPECT_EQ(mesh.index_in("dp_shard_cp", 7), 3);
  d.dp_replicate = 2;
  d.tp = 1;
  d.world_size = 8;
  const MeshLayout hsdp(d);
  EXPECT_EQ(hsdp.members("dp_shard_cp", 5), (Ranks{4, 5, 6, 7}));
  EXPECT_EQ(hsdp.members("dp_cp", 5), (Ranks{0, 1, 2, 3, 4, 5, 6, 7}));
}

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t length = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length);
  const int port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

class ContextParallelAttentionOverGloo : public ::testing::TestWithParam<bool> {};

TEST_P(ContextParallelAttentionOverGloo, TwoRanksEqualOneProcess) {
  const bool documents = GetParam();
  at::manual_seed(3);
  const int64_t B = 2, nq = 4, nkv = 2, S = 48, d = 8, cp = 2;
  const double scale = 0.25;
  const at::Tensor q0 = at::randn({B, nq, S, d}), k0 = at::randn({B, nkv, S, d});
  const at::Tensor v0 = at::randn({B, nkv, S, d}), probe = at::randn({B, nq, S, d});
  at::Tensor ids;
  if (documents) {
    // Documents of 5 and 7 tokens (row 0) and 9 (row 1): they cross every chunk boundary.
    ids = at::stack({at::arange(S, at::kLong).div(5, "floor") + (at::arange(S, at::kLong) >= 30),
                     at::arange(S, at::kLong).div(9, "floor")});
  }
  const auto attention = std::get<static_cast<size_t>(kernels::Op::kAttention)>(
      kernels::kernel_registry().get(kernels::Op::kAttention, "reference").fn);
  const auto attend = std::get<static_cast<size_t>(kernels::Op::kContextAttention)>(
      kernels::kernel_registry().get(kernels::Op::kContextAttention, "reference").fn);
  const at::Tensor q = q0.clone().requires_grad_(true), k = k0.clone().requires_grad_(true);
  const at::Tensor v = v0.clone().requires_grad_(true);
  const at::Tensor whole = attention(q, k, v, scale, 0, ids);
  (whole * probe).sum().backward();

  const SequenceShards shards(S, cp, LoadBalancer::kHeadTail);
  const int port = free_port();
  struct Result {
    at::Tensor out, dq, dk, dv;
    std::exception_ptr error;
  };
  std::vector<Result> results(cp);
  std::vector<std::thread> ranks;
  for (int64_t r = 0; r < cp; ++r) {
    ranks.emplace_back([&, r] {
      try {
        LaunchEnv env;
        env.rank = r;
        env.world_size = cp;
        env.master_port = port;
        WorldOptions options;
        options.init_timeout = std::chrono::seconds(60);
        World world(env, options);
        const auto hook =
            make_context_parallel_attention(world.world_group(), LoadBalancer::kHeadTail);
        const at::Tensor mine = shards.indices_of(r);
        auto local = [&](const at::Tensor& t) {
          return t.index_select(2, mine).clone().requires_grad_(true);
        };
        const at::Tensor ql = local(q0), kl = local(k0), vl = local(v0);
        const at::Tensor idsl = documents ? ids.index_select(1, mine) : at::Tensor();
        // Two layers share the gathered document ids of one forward.
        const at::Tensor o1 = hook(attend, ql, kl, vl, scale, idsl);
        const at::Tensor o2 = hook(attend, ql, kl, vl, scale, idsl);
        ((o1 + o2) * probe.index_select(2, mine)).sum().backward();
        // Both ranks are done with the store before rank 0's World (which hosts it) goes.
        at::Tensor done = at::ones({1});
        world.world_group()->all_reduce(done);
        results[r] = {o1.detach(), ql.grad() / 2, kl.grad() / 2, vl.grad() / 2, nullptr};
      } catch (...) {
        results[r].error = std::current_exception();
      }
    });
  }
  for (std::thread& t : ranks) t.join();
  for (const Result& r : results)
    if (r.error) std::rethrow_exception(r.error);
  for (int64_t r = 0; r < cp; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const at::Tensor mine = shards.indices_of(r);
    EXPECT_LT(relative_error(results[r].out, whole.index_select(2, mine)), 1e-5);
    EXPECT_LT(relative_error(results[r].dq, q.grad().index_select(2, mine)), 1e-5);
    // Each rank's key and value gradients: every rank's contributions to its own tokens.
    EXPECT_LT(relative_error(results[r].dk, k.grad().index_select(2, mine)), 1e-5);
    EXPECT_LT(relative_error(results[r].dv, v.grad().index_select(2, mine)), 1e-5);
  }
}

INSTANTIATE_TEST_SUITE_P(CausalAndDocuments, ContextParallelAttentionOverGloo,
                         ::testing::Values(false, true));

}  // namespace
}  // namespace titan::distributed
