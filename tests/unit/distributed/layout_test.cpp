// The pieces of data parallelism that need no second process: how rows are split, how degrees
// are checked against the world size, how torchrun's environment is read, and groups of one.
#include <gtest/gtest.h>

#include <cstdlib>

#include "../error_of.h"
#include "titan/common/error.h"
#include "titan/distributed/group.h"
#include "titan/distributed/launch_env.h"
#include "titan/distributed/parallel_dims.h"

namespace titan::distributed {
namespace {

using titan::testing::error_of;

TEST(ParallelDims, ResolvesTheShardDegreeAndRejectsWhatIsNotBuilt) {
  config::ParallelismConfig p;
  ParallelDims d = make_parallel_dims(p, 4);
  EXPECT_EQ(d.dp_shard, 4);
  EXPECT_EQ(d.dp_replicate, 1);
  p.data_parallel_replicate_degree = 2;
  d = make_parallel_dims(p, 4);
  EXPECT_EQ(d.dp_shard, 2);
  EXPECT_EQ(d.dp_size(), 4);
  p.data_parallel_shard_degree = 3;
  const std::string product = error_of([&] { make_parallel_dims(p, 4); });
  EXPECT_NE(product.find("world size is 4"), std::string::npos) << product;
  // One message names every degree.
  for (const char* key : {"data_parallel_replicate_degree=2", "data_parallel_shard_degree=3",
                          "context_parallel_degree=1", "tensor_parallel_degree=1",
                          "pipeline_parallel_degree=1", "expert_parallel_degree=1"})
    EXPECT_NE(product.find(key), std::string::npos) << key << ": " << product;
  // Every parallelism is built: context and pipeline degrees resolve, leaving dp_shard the rest.
  config::ParallelismConfig cp;
  cp.context_parallel_degree = 2;
  d = make_parallel_dims(cp, 4);
  EXPECT_EQ(d.cp, 2);
  EXPECT_EQ(d.dp_shard, 2);
  config::ParallelismConfig pp;
  pp.pipeline_parallel_degree = 2;
  d = make_parallel_dims(pp, 4);
  EXPECT_EQ(d.pp, 2);
  EXPECT_EQ(d.dp_shard, 2);
  config::ParallelismConfig tp_ep;
  tp_ep.tensor_parallel_degree = 2;
  tp_ep.expert_parallel_degree = 4;
  d = make_parallel_dims(tp_ep, 8);
  EXPECT_EQ(d.dp_shard, 4);
  EXPECT_EQ(d.tp, 2);
  EXPECT_EQ(d.efsdp(), 2);
}

TEST(LaunchEnv, ReadsTorchrunsVariablesAndNamesABadOne) {
  setenv("WORLD_SIZE", "4", 1);
  setenv("RANK", "2", 1);
  setenv("LOCAL_RANK", "0", 1);
  setenv("TORCHELASTIC_USE_AGENT_STORE", "True", 1);
  LaunchEnv env = launch_env_from_environment();
  EXPECT_EQ(env.world_size, 4);
  EXPECT_EQ(env.rank, 2);
  EXPECT_EQ(env.local_rank, 0);
  EXPECT_TRUE(env.agent_store);
  EXPECT_TRUE(env.multi_process());
  setenv("RANK", "4", 1);
  EXPECT_NE(error_of([] { launch_env_from_environment(); }).find("RANK=4"), std::string::npos);
  setenv("WORLD_SIZE", "two", 1);
  EXPECT_NE(error_of([] { launch_env_from_environment(); }).find("WORLD_SIZE='two'"),
            std::string::npos);
  for (const char* v : {"WORLD_SIZE", "RANK", "LOCAL_RANK", "TORCHELASTIC_USE_AGENT_STORE"})
    unsetenv(v);
  env = launch_env_from_environment();
  EXPECT_EQ(env.world_size, 1);
  EXPECT_FALSE(env.multi_process());
}

TEST(Group, AGroupOfOneIsTheIdentity) {
  auto group = Group::solo("solo");
  EXPECT_EQ(group->size(), 1);
  EXPECT_EQ(group->rank(), 0);
  at::Tensor t = at::arange(4, at::kFloat);
  group->all_reduce(t);
  EXPECT_TRUE(at::equal(t, at::arange(4, at::kFloat)));
  std::vector<at::Tensor> in{at::ones({2, 3})}, out{at::zeros({2, 3})};
  group->all_gather_async(out, in).wait();
  EXPECT_TRUE(at::equal(out[0], in[0]));
  group->barrier();
}

}  // namespace
}  // namespace titan::distributed
