// Placements and boxes (common/placement.h): every rank's box, over every layout, tiles the
// global tensor exactly once, for uneven sizes, replicated dimensions and nested shards.
#include <gtest/gtest.h>

#include <functional>

#include "../error_of.h"
#include "titan/common/box_tensor.h"
#include "titan/common/placement.h"

namespace titan {
namespace {

struct Dim {
  std::string name;
  int64_t size;
  Placement placement;
};

// Calls `visit` with the placement of every rank (every combination of coordinates).
void for_every_rank(const std::vector<int64_t>& shape, const std::vector<Dim>& dims,
                    const std::function<void(const TensorPlacement&)>& visit) {
  std::vector<int64_t> index(dims.size(), 0);
  while (true) {
    TensorPlacement p{shape, {}};
    for (size_t i = 0; i < dims.size(); ++i)
      p.on.push_back({dims[i].name, dims[i].size, index[i], dims[i].placement});
    visit(p);
    size_t i = dims.size();
    while (i > 0 && ++index[i - 1] == dims[i - 1].size) index[--i] = 0;
    if (i == 0) return;
  }
}

// Counts, per global entry, how many writing ranks' boxes hold it; checks each replica's box
// equals the writer's and the local shape is the same on every rank.
void expect_tiles_once(const std::vector<int64_t>& shape, const std::vector<Dim>& dims) {
  at::Tensor count = at::zeros(shape, at::kInt);
  std::vector<int64_t> first_local;
  for_every_rank(shape, dims, [&](const TensorPlacement& p) {
    const std::vector<int64_t> local = local_shape(p);
    if (first_local.empty()) first_local = local;
    EXPECT_EQ(local, first_local) << describe(p);
    const Box box = local_box(p);
    for (size_t d = 0; d < shape.size(); ++d) EXPECT_LE(box.length[d], local[d]) << describe(p);
    if (writes_piece(p)) narrow_to(count, whole_box(shape), box).add_(1);
  });
  EXPECT_TRUE(at::equal(count, at::ones(shape, at::kInt)))
      << "entries held by no writer or by several: " << count;
}

TEST(Placement, EvenSplitsPadTheLastParts) {
  // Qwen3's vocabulary does not divide 7 ranks.
  int64_t covered = 0;
  for (int64_t i = 0; i < 7; ++i) {
    const EvenSplit s = even_split(151936, 7, i);
    EXPECT_EQ(s.part, (151936 + 6) / 7);
    EXPECT_EQ(s.begin, covered);
    covered += s.real;
  }
  EXPECT_EQ(covered, 151936);
  const EvenSplit tail = even_split(3, 4, 3);  // more ranks than rows: padding only
  EXPECT_EQ(tail.part, 1);
  EXPECT_EQ(tail.real, 0);
  EXPECT_EQ(tail.begin, 3);
}

TEST(Placement, BoxesTileTheTensorOnceForEveryLayout) {
  const Placement rep = Placement::replicate(), row = Placement::shard(0),
                  col = Placement::shard(1);
  expect_tiles_once({7, 3}, {{"dp_shard", 2, row}});
  expect_tiles_once({5, 3}, {{"dp_shard", 4, row}, {"dp_replicate", 2, rep}});  // HSDP, uneven
  expect_tiles_once({3, 2}, {{"dp_shard", 4, row}});                            // padding only
  expect_tiles_once({8, 6}, {{"tp", 2, row}, {"dp_shard", 3, row}});            // TP then FSDP
  expect_tiles_once({6, 10}, {{"tp", 2, col}, {"dp_shard", 3, row}});           // row-parallel
  expect_tiles_once({9, 5}, {{"tp", 2, row}, {"dp_shard", 4, row}, {"dp_replicate", 3, rep}});
  expect_tiles_once({4, 6, 5}, {{"ep", 2, row}, {"efsdp", 2, Placement::shard(1)}});  // experts
  expect_tiles_once({7}, {{"tp", 3, rep}, {"dp_shard", 2, row}});
  expect_tiles_once({}, {{"dp_replicate", 2, rep}});  // a scalar
}

TEST(Placement, NestedShardsSplitTheParentsPiece) {
  // [10, 4]: tp 2 gives rows 0-4 and 5-9; FSDP 2 splits each into 3 + 2 rows.
  TensorPlacement p{{10, 4},
                    {{"tp", 2, 1, Placement::shard(0)}, {"dp_shard", 2, 0, Placement::shard(0)}}};
  EXPECT_EQ(local_shape(p), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(local_box(p), (Box{{5, 0}, {3, 4}}));
  p.on[1].index = 1;
  EXPECT_EQ(local_box(p), (Box{{8, 0}, {2, 4}}));
  EXPECT_EQ(p.sharded_over(), (std::vector<std::string>{"tp", "dp_shard"}));
  EXPECT_FALSE(p.whole());
  EXPECT_EQ(describe(p), "[tp: Shard(0), dp_shard: Shard(0)]");
  const TensorPlacement replicated{{4}, {{"dp_replicate", 2, 1, Placement::replicate()}}};
  EXPECT_TRUE(replicated.whole());
  EXPECT_FALSE(writes_piece(replicated));
  EXPECT_NE(testing::error_of([] {
              local_shape({{4}, {{"tp", 2, 0, Placement::shard(1)}}});
            }).find("no dimension 1"),
            std::string::npos);
}

TEST(Placement, AStagesOwnTensorsAreWrittenByEachStage) {
  // A pipeline stage's FSDP-sharded weight: every stage writes its own tensor, and within the
  // stage each shard its rows; its step counter (whole) only the stage's first shard.
  for (int64_t stage : {0, 1}) {
    for (int64_t shard : {0, 1}) {
      const TensorPlacement p{
          {4, 3},
          {{"dp_shard", 2, shard, Placement::shard(0)}, {"pp", 2, stage, Placement::owned()}}};
      EXPECT_TRUE(writes_piece(p)) << describe(p);
      EXPECT_EQ(writes_companion(p), shard == 0) << describe(p);
      EXPECT_EQ(local_shape(p), (std::vector<int64_t>{2, 3}));
      EXPECT_FALSE(p.whole());
    }
  }
  const TensorPlacement owned{{4}, {{"pp", 4, 3, Placement::owned()}}};
  EXPECT_TRUE(owned.whole());
  EXPECT_TRUE(owned.sharded_over().empty());
  EXPECT_EQ(describe(owned), "[pp: Owned]");
  // The tied embedding the last stage holds as its head: the first stage's copy is written.
  EXPECT_FALSE(writes_piece({{4}, {{"pp", 2, 1, Placement::replicate()}}}));
}

TEST(Placement, IntersectAndNarrow) {
  const Box a{{2, 0}, {4, 3}}, b{{4, 1}, {5, 5}};
  EXPECT_EQ(intersect(a, b), (Box{{4, 1}, {2, 2}}));
  EXPECT_TRUE(intersect(a, Box{{7, 0}, {1, 3}}).empty());
  const at::Tensor t = at::arange(7 * 4).view({7, 4});
  EXPECT_TRUE(at::equal(narrow_to(t, whole_box({7, 4}), Box{{4, 1}, {2, 2}}),
                        t.narrow(0, 4, 2).narrow(1, 1, 2)));
  // A piece holding rows 2..5: the same entries, from its own coordinates.
  EXPECT_TRUE(at::equal(narrow_to(t.narrow(0, 2, 4), a, intersect(a, b)),
                        t.narrow(0, 4, 2).narrow(1, 1, 2)));
  EXPECT_FALSE(testing::error_of([&] { narrow_to(t, a, b); }).empty());
}

}  // namespace
}  // namespace titan
