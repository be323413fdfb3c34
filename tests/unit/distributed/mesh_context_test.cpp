// The parallel context over a real mesh, in one process (in_process_ranks.h: a thread a rank):
// the placements parallelize leaves, completed by finish_placements; the data-parallel wrapper,
// whose sharded gradients are the rows of one process's; the reductions by purpose.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <map>

#include "in_process_ranks.h"
#include "titan/common/box_tensor.h"
#include "titan/config/trainer_config.h"
#include "titan/distributed/mesh_context.h"
#include "titan/models/model_spec.h"
#include "titan/models/qwen3/model.h"

namespace titan::distributed {
namespace {

using testing::run_ranks;

models::Qwen3Args tiny() {
  models::Qwen3Args a;
  a.vocab_size = 64;
  a.hidden_size = 32;
  a.intermediate_size = 48;
  a.num_hidden_layers = 2;
  a.num_attention_heads = 4;
  a.num_key_value_heads = 2;
  a.head_dim = 8;
  return a;
}

std::unique_ptr<models::Qwen3Model> build() {
  models::BuildOptions b;
  b.seed = 5;
  return std::make_unique<models::Qwen3Model>(tiny(), models::Qwen3Options{}, b);
}

std::unique_ptr<MeshContext> context(World& world, const config::ParallelismConfig& p) {
  const ParallelDims dims = make_parallel_dims(p, world.size());
  return std::make_unique<MeshContext>(std::make_unique<DeviceMesh>(world, dims),
                                       DataParallelOptions{});
}

at::Tensor rows_ids() { return at::arange(32, at::kLong).remainder(64).view({4, 8}); }
at::Tensor rows_labels() { return (at::arange(32, at::kLong) * 5 + 1).remainder(64).view({4, 8}); }

// Summed token loss of `rows` of the batch, over `tokens` tokens in all.
at::Tensor loss_of(models::Model& model, int64_t first_row, int64_t rows, double tokens) {
  const at::Tensor ids = rows_ids().narrow(0, first_row, rows);
  const at::Tensor labels = rows_labels().narrow(0, first_row, rows);
  const at::Tensor hidden = model.forward(ids).hidden;
  const at::Tensor logits = at::linear(hidden, model.output_weight());
  return at::cross_entropy_loss(logits.flatten(0, 1), labels.flatten(), {}, at::Reduction::Sum) /
         tokens;
}

TEST(MeshContext, FinishPlacementsNamesEveryReplicatedDimensionOnce) {
  config::ParallelismConfig p;
  p.data_parallel_replicate_degree = 2;
  p.data_parallel_shard_degree = 1;
  p.tensor_parallel_degree = 2;
  std::mutex mutex;
  std::map<int64_t, std::string> q_proj, writes;
  run_ranks(4, [&](World& world) {
    auto ctx = context(world, p);
    auto model = build();
    config::TrainerConfig cfg;
    cfg.parallelism = p;
    models::get_model_spec("qwen3").parallelize(*model, cfg, *ctx);
    ctx->finish_placements();
    const TensorPlacement* placement =
        ctx->placements().find("model.layers.0.self_attn.q_proj.weight");
    ASSERT_NE(placement, nullptr);
    std::lock_guard<std::mutex> lock(mutex);
    q_proj[world.rank()] = describe(*placement);
    writes[world.rank()] = writes_piece(*placement) ? "writes" : "-";
  });
  // tp splits the rows, then the two data-parallel replicas hold the same piece.
  for (const auto& [rank, text] : q_proj)
    EXPECT_EQ(text, "[tp: Shard(0), dp_replicate: Replicate]") << rank;
  // One replica of each tp piece writes it: ranks 0 and 1 (dp_replicate index 0).
  EXPECT_EQ(writes[0], "writes");
  EXPECT_EQ(writes[1], "writes");
  EXPECT_EQ(writes[2], "-");
  EXPECT_EQ(writes[3], "-");
}

TEST(DataParallel, ShardedGradientsAreTheRowsOfOneProcesssGradients) {
  // One process over the whole batch.
  auto whole = build();
  loss_of(*whole, 0, 4, 32.0).backward();
  std::map<std::string, at::Tensor> expected;
  for (auto& [name, t] : whole->named_parameters()) expected[name] = t.grad();

  config::ParallelismConfig p;
  p.data_parallel_shard_degree = 2;
  std::mutex mutex;
  std::vector<std::string> failures;
  run_ranks(2, [&](World& world) {
    auto ctx = context(world, p);
    auto model = build();
    config::TrainerConfig cfg;
    cfg.parallelism = p;
    models::get_model_spec("qwen3").parallelize(*model, cfg, *ctx);
    ctx->finish_placements();
    const NamedTensors params = model->named_parameters();
    // Each rank its half of the rows; the loss over the global token count.
    ctx->start_backward(/*last=*/true);
    loss_of(*model, 2 * world.rank(), 2, 32.0).backward();
    ctx->finish_backward(/*last=*/true, params);
    for (const auto& [name, local] : params) {
      const TensorPlacement* placement = ctx->placements().find(name);
      std::lock_guard<std::mutex> lock(mutex);
      if (placement == nullptr || !local.grad().defined()) {
        failures.push_back(name + ": no placement or gradient on rank " +
                           std::to_string(world.rank()));
        continue;
      }
      const Box box = local_box(*placement);
      const at::Tensor mine = real_part(local.grad(), box);
      const at::Tensor theirs =
          narrow_to(expected.at(name), whole_box(placement->global_shape), box);
      const double scale = std::max(theirs.abs().max().item<double>(), 1e-12);
      if ((mine - theirs).abs().max().item<double>() > 1e-5 * scale)
        failures.push_back(name + " differs on rank " + std::to_string(world.rank()));
    }
  });
  EXPECT_TRUE(failures.empty()) << failures.front();
}

TEST(MeshContext, ReductionsByPurposeSpanTheirRanks) {
  config::ParallelismConfig p;
  p.data_parallel_shard_degree = 2;
  p.tensor_parallel_degree = 2;
  std::mutex mutex;
  std::map<int64_t, std::vector<double>> seen;
  run_ranks(4, [&](World& world) {
    auto ctx = context(world, p);
    std::vector<double> out;
    for (const char* purpose : {"batch", "loss", "layer_replicas", "world"}) {
      at::Tensor t = at::ones({1}, at::kDouble);
      ctx->all_reduce(purpose, t);
      out.push_back(t.item<double>());
      out.push_back(static_cast<double>(ctx->purpose_size(purpose)));
    }
    at::Tensor rank = at::full({1}, static_cast<double>(world.rank()), at::kDouble);
    ctx->all_reduce("loss", rank, models::Reduction::kMax);
    out.push_back(rank.item<double>());
    std::lock_guard<std::mutex> lock(mutex);
    seen[world.rank()] = out;
  });
  for (const auto& [rank, v] : seen) {
    EXPECT_EQ(v[0], 2) << rank;  // batch: the two data-parallel ranks
    EXPECT_EQ(v[1], 2) << rank;
    EXPECT_EQ(v[2], 2) << rank;  // loss: the same today
    EXPECT_EQ(v[4], 4) << rank;  // layer_replicas: everyone without pipeline stages
    EXPECT_EQ(v[6], 4) << rank;  // world
    // the max over the loss ranks: the higher dp rank of this tp column
    EXPECT_EQ(v[8], rank % 2 + 2) << rank;
  }
}

}  // namespace
}  // namespace titan::distributed
