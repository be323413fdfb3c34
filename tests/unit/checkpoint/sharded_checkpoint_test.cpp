// Training checkpoints written by several ranks: each rank's pieces plus rank 0's manifest,
// read back at any row range (resharding), and whole. Two "ranks" run in one process here,
// sharing a map as the store.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "titan/checkpoint/training_checkpoint.h"
#include "titan/common/error.h"

namespace titan::checkpoint {
namespace {

namespace fs = std::filesystem;

SaveCoordination coordination(int64_t rank, std::map<std::string, std::string>& store) {
  SaveCoordination c;
  c.rank = rank;
  c.world_size = 2;
  c.run_id = "test";
  c.publish = [&store](const std::string& k, const std::string& v) { store[k] = v; };
  c.collect = [&store](const std::string& k) { return store.at(k); };
  return c;
}

TEST(ShardedCheckpoint, PiecesOfTwoRanksReadBackAtAnyRows) {
  const fs::path folder = fs::temp_directory_path() / "titan_sharded_ckpt_test";
  fs::remove_all(folder);
  const at::Tensor full = at::arange(7 * 3, at::kFloat).view({7, 3});
  const at::Tensor bias = at::arange(5, at::kFloat);
  std::map<std::string, std::string> store;
  const CheckpointStore ckpts(folder.string(), 0);
  // Rows 0..3 on rank 0, 4..6 on rank 1 (as FSDP over 2 ranks splits 7 rows); the whole bias
  // from rank 0 only.
  for (int64_t rank : {1, 0}) {
    TrainingCheckpoint c;
    c.step = 5;
    const int64_t begin = rank == 0 ? 0 : 4, rows = rank == 0 ? 4 : 3;
    c.model.emplace_back("w", full.narrow(0, begin, rows));
    c.pieces["w"] = {{7, 3}, begin};
    if (rank == 0) {
      c.model.emplace_back("bias", bias);
      c.state["train_state"] = {{"step", 5}};
    }
    ckpts.save(c, coordination(rank, store));
  }
  ASSERT_EQ(ckpts.complete_steps(), std::vector<int64_t>{5});
  const std::string dir = ckpts.step_dir(5);
  EXPECT_TRUE(fs::exists(fs::path(dir) / "model-rank0.safetensors"));
  EXPECT_TRUE(fs::exists(fs::path(dir) / "model-rank1.safetensors"));

  const CheckpointReader reader(dir);
  EXPECT_EQ(reader.global_shape("model", "w"), (std::vector<int64_t>{7, 3}));
  // A layout of 3 ranks wants rows 3..5: one from each file.
  EXPECT_TRUE(at::equal(reader.read_rows("model", "w", 3, 6), full.narrow(0, 3, 3)));
  EXPECT_TRUE(at::equal(reader.read("model", "w"), full));
  EXPECT_TRUE(at::equal(reader.read("model", "bias"), bias));
  EXPECT_EQ(reader.state()["train_state"]["step"], 5);

  const TrainingCheckpoint whole = ckpts.load(5);
  ASSERT_EQ(whole.model.size(), 2u);
  std::map<std::string, at::Tensor> by_name(whole.model.begin(), whole.model.end());
  EXPECT_TRUE(at::equal(by_name.at("w"), full));
  fs::remove_all(folder);
}

TEST(ShardedCheckpoint, MissingRowsAreAnErrorNamingTheTensor) {
  const fs::path folder = fs::temp_directory_path() / "titan_sharded_ckpt_missing";
  fs::remove_all(folder);
  std::map<std::string, std::string> store;
  const CheckpointStore ckpts(folder.string(), 0);
  // Rank 1 holds nothing of "w" (its piece was lost): rows 4..6 exist nowhere.
  for (int64_t rank : {1, 0}) {
    TrainingCheckpoint c;
    c.step = 1;
    if (rank == 0) {
      c.model.emplace_back("w", at::zeros({4, 2}));
      c.pieces["w"] = {{7, 2}, 0};
    }
    ckpts.save(c, coordination(rank, store));
  }
  const CheckpointReader reader(ckpts.step_dir(1));
  try {
    reader.read_rows("model", "w", 2, 6);
    FAIL() << "no error";
  } catch (const titan::Error& e) {
    EXPECT_NE(std::string(e.what()).find("rows [2, 6) of model tensor 'w'"), std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(at::equal(reader.read_rows("model", "w", 1, 3), at::zeros({2, 2})));
  fs::remove_all(folder);
}

}  // namespace
}  // namespace titan::checkpoint
