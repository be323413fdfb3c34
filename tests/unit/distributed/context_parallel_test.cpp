// Context parallelism's pieces without torchrun: the sequence's split over cp ranks (head-tail
// and contiguous, torchtitan's indices), the mesh groups it adds, and the attention of
// ContextParallelAttention over a real Gloo group of two ranks (two threads of this process,
// each its own World) against one process's attention on the whole sequence, forward and
// backward: the all-gather of keys and values, their order, the gathered document ids and the
// reduce-scatter of their gradients.
#include <gtest/gtest.h>

#include <map>
#include <mutex>

#include "error_of.h"
#include "in_process_ranks.h"
#include "relative_error.h"
#include "titan/common/box_tensor.h"
#include "titan/config/trainer_config.h"
#include "titan/distributed/context_parallel_attention.h"
#include "titan/distributed/mesh_context.h"
#include "titan/distributed/parallel_dims.h"
#include "titan/distributed/sequence_shards.h"
#include "titan/distributed/world.h"
#include "titan/kernels/registry.h"
#include "titan/models/model_spec.h"
#include "titan/models/qwen3/model.h"

namespace titan::distributed {
namespace {

using Ranks = std::vector<int64_t>;
using titan::testing::error_of;
using titan::testing::relative_error;
using titan::testing::run_ranks;

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
  struct Result {
    at::Tensor out, dq, dk, dv;
  };
  std::mutex mutex;
  std::map<int64_t, Result> results;
  run_ranks(cp, [&](World& world) {
    const int64_t r = world.rank();
    const auto hook = make_context_parallel_attention(world.world_group(), LoadBalancer::kHeadTail);
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
    std::lock_guard<std::mutex> lock(mutex);
    results[r] = {o1.detach(), ql.grad() / 2, kl.grad() / 2, vl.grad() / 2};
  });
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

TEST(ContextParallelContext, TheLossSpansTheCpRanksAndTheRowsDoNot) {
  // dp_shard 2 x cp 2: the cp ranks of a data-parallel rank read the same rows (batch: 2
  // ranks) but each holds its own tokens' loss (loss: all 4); they share the reading.
  config::ParallelismConfig p;
  p.data_parallel_shard_degree = 2;
  p.context_parallel_degree = 2;
  std::mutex mutex;
  std::map<int64_t, std::vector<int64_t>> seen;
  run_ranks(4, [&](World& world) {
    MeshContext ctx(std::make_unique<DeviceMesh>(world, make_parallel_dims(p, 4)),
                    DataParallelOptions{});
    at::Tensor one = at::ones({1}, at::kDouble);
    ctx.all_reduce("loss", one);
    std::lock_guard<std::mutex> lock(mutex);
    seen[world.rank()] = {ctx.purpose_size("batch"), ctx.purpose_rank("batch"),
                          ctx.purpose_size("loss"),  static_cast<int64_t>(one.item<double>()),
                          ctx.mesh().size("data"),   ctx.data_parallel() ? 1 : 0};
  });
  for (const auto& [rank, v] : seen) {
    EXPECT_EQ(v, (std::vector<int64_t>{2, rank / 2, 4, 4, 4, 1})) << rank;
  }
}

// A whole model under CP 2 (FSDP folded over the cp ranks): each rank runs its part of the rows
// (global positions, document ids) and its loss over its labels; the gradients of its FSDP
// shards are those rows of one process's gradients over the whole rows.
std::unique_ptr<models::Qwen3Model> tiny_model() {
  models::Qwen3Args a;
  a.vocab_size = 64;
  a.hidden_size = 32;
  a.intermediate_size = 48;
  a.num_hidden_layers = 2;
  a.num_attention_heads = 4;
  a.num_key_value_heads = 2;
  a.head_dim = 8;
  models::BuildOptions b;
  b.seed = 5;
  return std::make_unique<models::Qwen3Model>(a, models::Qwen3Options{}, b);
}

// Each row's documents as lengths -> (document ids, positions restarting at each) [rows, S].
std::pair<at::Tensor, at::Tensor> documents_of(const std::vector<std::vector<int64_t>>& rows) {
  std::vector<at::Tensor> ids, positions;
  for (const auto& lengths : rows) {
    std::vector<at::Tensor> i, p;
    for (size_t d = 0; d < lengths.size(); ++d) {
      i.push_back(at::full({lengths[d]}, static_cast<int64_t>(d), at::kLong));
      p.push_back(at::arange(lengths[d], at::kLong));
    }
    ids.push_back(at::cat(i));
    positions.push_back(at::cat(p));
  }
  return {at::stack(ids), at::stack(positions)};
}

class ContextParallelModel : public ::testing::TestWithParam<bool> {};

TEST_P(ContextParallelModel, TheRanksPartsGiveOneProcesssGradients) {
  const bool documents = GetParam();
  const int64_t B = 2, S = 16, cp = 2;
  const at::Tensor ids = at::arange(B * S, at::kLong).remainder(64).view({B, S});
  const at::Tensor labels = (at::arange(B * S, at::kLong) * 5 + 1).remainder(64).view({B, S});
  // Documents of 3, 6, 7 and 5, 5, 6 tokens: they cross the chunks of 4 and the ranks.
  const auto [docs, positions] = documents_of({{3, 6, 7}, {5, 5, 6}});
  auto loss_of = [&](models::Model& model, const at::Tensor& mine, int64_t end) {
    auto part = [&](const at::Tensor& t) { return t.index_select(1, mine); };
    models::PackedDocuments packed;
    packed.positions = documents ? part(positions) : mine.unsqueeze(0).expand({B, -1}).contiguous();
    if (documents) packed.document_ids = part(docs);
    packed.positions_end = end;
    const at::Tensor hidden = model.forward_packed(part(ids), packed).hidden;
    const at::Tensor logits = at::linear(hidden, model.output_weight());
    return at::cross_entropy_loss(logits.flatten(0, 1), part(labels).flatten(), {},
                                  at::Reduction::Sum) /
           static_cast<double>(B * S);
  };
  auto whole = tiny_model();
  loss_of(*whole, at::arange(S, at::kLong), S).backward();
  std::map<std::string, at::Tensor> expected;
  for (auto& [name, t] : whole->named_parameters()) expected[name] = t.grad();

  config::TrainerConfig cfg;
  cfg.parallelism.context_parallel_degree = cp;
  cfg.training.seq_len = S;
  const SequenceShards shards(S, cp, LoadBalancer::kHeadTail);
  std::mutex mutex;
  std::vector<std::string> failures;
  run_ranks(cp, [&](World& world) {
    auto ctx = std::make_unique<MeshContext>(
        std::make_unique<DeviceMesh>(world, make_parallel_dims(cfg.parallelism, cp)),
        DataParallelOptions{});
    auto model = tiny_model();
    models::get_model_spec("qwen3").parallelize(*model, cfg, *ctx);
    ctx->finish_placements();
    const NamedTensors params = model->named_parameters();
    ctx->start_backward(/*last=*/true);
    loss_of(*model, shards.indices_of(world.rank()), S).backward();
    ctx->finish_backward(/*last=*/true, params);
    std::lock_guard<std::mutex> lock(mutex);
    for (const auto& [name, local] : params) {
      const TensorPlacement* placement = ctx->placements().find(name);
      if (placement == nullptr || !local.grad().defined() ||
          describe(*placement) != "[dp_shard_cp: Shard(0)]") {
        failures.push_back(name + ": not FSDP-sharded over dp_shard_cp, or no gradient");
        continue;
      }
      const Box box = local_box(*placement);
      const at::Tensor theirs =
          narrow_to(expected.at(name), whole_box(placement->global_shape), box);
      if (relative_error(real_part(local.grad(), box), theirs) > 1e-5)
        failures.push_back(name + " differs on rank " + std::to_string(world.rank()));
    }
  });
  EXPECT_TRUE(failures.empty()) << failures.front();
}

INSTANTIATE_TEST_SUITE_P(CausalAndDocuments, ContextParallelModel, ::testing::Values(false, true));

}  // namespace
}  // namespace titan::distributed
