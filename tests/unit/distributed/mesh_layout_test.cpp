// The device mesh's arithmetic, without processes: which ranks each named group holds for a
// layout, and where expert parallelism borrows its ranks.
#include <gtest/gtest.h>

#include <set>

#include "../error_of.h"
#include "titan/distributed/device_mesh.h"
#include "titan/distributed/parallel_dims.h"

namespace titan::distributed {
namespace {

using Ranks = std::vector<int64_t>;

ParallelDims dims(int64_t replicate, int64_t shard, int64_t tp, int64_t ep = 1) {
  ParallelDims d;
  d.dp_replicate = replicate;
  d.dp_shard = shard;
  d.tp = tp;
  d.ep = ep;
  d.world_size = replicate * shard * tp;
  return d;
}

TEST(MeshLayout, GroupsOfATwoByTwoByTwoLayout) {
  // rank = (replicate * 2 + shard) * 2 + tp: tp varies fastest, as in torchtitan.
  const MeshLayout mesh(dims(2, 2, 2));
  EXPECT_EQ(mesh.members("tp", 5), (Ranks{4, 5}));
  EXPECT_EQ(mesh.members("dp_shard", 5), (Ranks{5, 7}));
  EXPECT_EQ(mesh.members("dp_replicate", 5), (Ranks{1, 5}));
  EXPECT_EQ(mesh.members("dp", 5), (Ranks{1, 3, 5, 7}));
  EXPECT_EQ(mesh.members("world", 5), (Ranks{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(mesh.members("cp", 5), (Ranks{5}));
  EXPECT_EQ(mesh.index_in("dp_shard", 5), 0);
  EXPECT_EQ(mesh.index_in("dp_shard", 7), 1);
  EXPECT_EQ(mesh.index_in("dp", 7), 3);
  EXPECT_EQ(mesh.size_of("dp"), 4);
  // Every name partitions the world: each rank in exactly one group of it.
  for (const std::string& name : MeshLayout::group_names()) {
    std::multiset<int64_t> seen;
    for (const Ranks& group : mesh.all_groups(name)) {
      EXPECT_EQ(static_cast<int64_t>(group.size()), mesh.size_of(name)) << name;
      seen.insert(group.begin(), group.end());
    }
    EXPECT_EQ(seen.size(), 8u) << name;
    for (int64_t r = 0; r < 8; ++r) EXPECT_EQ(seen.count(r), 1u) << name << " rank " << r;
  }
}

TEST(MeshLayout, ExpertsBorrowTheirRanksFromShardTimesTensor) {
  // dp_shard 4 x tp 2 (8 ranks), ep 4: ep takes 4 consecutive ranks of shard x tp, efsdp the
  // rest (2), so expert weights are sharded 4 ways by ep and then 2 ways by FSDP.
  const MeshLayout mesh(dims(1, 4, 2, 4));
  EXPECT_EQ(mesh.members("ep", 1), (Ranks{0, 1, 2, 3}));
  EXPECT_EQ(mesh.members("ep", 6), (Ranks{4, 5, 6, 7}));
  EXPECT_EQ(mesh.members("efsdp", 1), (Ranks{1, 5}));
  EXPECT_EQ(mesh.size_of("efsdp"), 2);
  EXPECT_EQ(mesh.dims().efsdp(), 2);
  // HSDP around it: the expert groups stay inside one replica.
  const MeshLayout hsdp(dims(2, 2, 1, 2));
  EXPECT_EQ(hsdp.members("ep", 3), (Ranks{2, 3}));
  EXPECT_EQ(hsdp.members("efsdp", 3), (Ranks{3}));
  EXPECT_EQ(hsdp.members("dp_replicate", 3), (Ranks{1, 3}));
}

TEST(MeshLayout, APipelineIsTheOutermostDimension) {
  // pp 2 x dp_shard 2 x tp 2: a stage is 4 consecutive ranks; a pipeline group takes one rank
  // of each stage with the same other coordinates (torchtitan's layout).
  ParallelDims d = dims(1, 2, 2);
  d.pp = 2;
  d.world_size = 8;
  const MeshLayout mesh(d);
  EXPECT_EQ(mesh.members("pp", 5), (Ranks{1, 5}));
  EXPECT_EQ(mesh.index_in("pp", 5), 1);
  EXPECT_EQ(mesh.members("stage", 5), (Ranks{4, 5, 6, 7}));
  EXPECT_EQ(mesh.members("dp_shard", 5), (Ranks{5, 7}));
  EXPECT_EQ(mesh.members("tp", 5), (Ranks{4, 5}));
  // Without a pipeline a stage is the world.
  EXPECT_EQ(MeshLayout(dims(1, 2, 2)).members("stage", 3), (Ranks{0, 1, 2, 3}));
}

TEST(MeshLayout, RefusesWhatDoesNotFit) {
  EXPECT_NE(testing::error_of([] { MeshLayout(dims(1, 3, 1, 2)); }).find("expert degree 2"),
            std::string::npos);
  EXPECT_NE(testing::error_of([] { MeshLayout(dims(1, 2, 1)).members("xp", 0); }).find("'xp'"),
            std::string::npos);
}

TEST(DeviceMesh, OneProcessHasGroupsOfOne) {
  const DeviceMesh mesh(dims(1, 1, 1));
  for (const std::string& name : MeshLayout::group_names()) {
    EXPECT_EQ(mesh.size(name), 1) << name;
    EXPECT_EQ(mesh.coordinate(name), 0) << name;
  }
  EXPECT_EQ(mesh.size("data"), 1);
  EXPECT_NE(testing::error_of([&] { mesh.group("nope"); }).find("no group named 'nope'"),
            std::string::npos);
}

}  // namespace
}  // namespace titan::distributed
