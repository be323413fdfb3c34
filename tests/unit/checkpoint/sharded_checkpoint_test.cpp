// Training checkpoints written by several ranks: each rank's pieces (N-d boxes) plus rank 0's
// manifest, read back at any box (resharding), and whole. Two "ranks" run in one process here,
// sharing a map as the store.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "../error_of.h"
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

TEST(ShardedCheckpoint, PiecesOfTwoRanksReadBackAtAnyBox) {
  const fs::path folder = fs::temp_directory_path() / "titan_sharded_ckpt_test";
  fs::remove_all(folder);
  const at::Tensor full = at::arange(7 * 6, at::kFloat).view({7, 6});
  const at::Tensor bias = at::arange(5, at::kFloat);
  std::map<std::string, std::string> store;
  const CheckpointStore ckpts(folder.string(), 0);
  // "w": rows 0..3 on rank 0, rows 4..6 on rank 1 (FSDP over 2 ranks); "v" split on dim 1
  // (columns 0..2 and 3..5, as a row-parallel weight under tensor parallelism). The whole
  // bias from rank 0 only.
  for (int64_t rank : {1, 0}) {
    TrainingCheckpoint c;
    c.step = 5;
    c.mesh = {{"world_size", 2}, {"dims", {{"dp_shard", 2}}}};
    CheckpointPart& model = c.part("model");
    const int64_t begin = rank == 0 ? 0 : 4, rows = rank == 0 ? 4 : 3;
    model.tensors.emplace_back("w", full.narrow(0, begin, rows));
    model.pieces["w"] = {{7, 6}, {begin, 0}};
    model.tensors.emplace_back("v", full.narrow(1, 3 * rank, 3).contiguous());
    model.pieces["v"] = {{7, 6}, {0, 3 * rank}};
    if (rank == 0) {
      model.tensors.emplace_back("bias", bias);
      c.part("train_state").state = {{"step", 5}};
    }
    ckpts.save(c, coordination(rank, store));
  }
  ASSERT_EQ(ckpts.complete_steps(), std::vector<int64_t>{5});
  const std::string dir = ckpts.step_dir(5);
  EXPECT_TRUE(fs::exists(fs::path(dir) / "model-rank0.safetensors"));
  EXPECT_TRUE(fs::exists(fs::path(dir) / "model-rank1.safetensors"));

  const CheckpointReader reader(dir);
  EXPECT_EQ(reader.global_shape("model", "w"), (std::vector<int64_t>{7, 6}));
  EXPECT_EQ(reader.mesh()["dims"]["dp_shard"], 2);
  // A layout of 3 ranks wants rows 3..5: one from each file.
  EXPECT_TRUE(at::equal(reader.read_box("model", "w", {{3, 0}, {3, 6}}), full.narrow(0, 3, 3)));
  // A box across both files of "v" and a part of "w".
  const Box corner{{2, 1}, {4, 4}};
  const at::Tensor expected = full.narrow(0, 2, 4).narrow(1, 1, 4);
  EXPECT_TRUE(at::equal(reader.read_box("model", "v", corner), expected));
  EXPECT_TRUE(at::equal(reader.read_box("model", "w", corner), expected));
  EXPECT_TRUE(at::equal(reader.read("model", "w"), full));
  EXPECT_TRUE(at::equal(reader.read("model", "bias"), bias));
  EXPECT_EQ(reader.state_of("train_state")["step"], 5);

  const TrainingCheckpoint whole = ckpts.load(5);
  const CheckpointPart* model = whole.find("model");
  ASSERT_NE(model, nullptr);
  ASSERT_EQ(model->tensors.size(), 3u);
  std::map<std::string, at::Tensor> by_name(model->tensors.begin(), model->tensors.end());
  EXPECT_TRUE(at::equal(by_name.at("w"), full));
  EXPECT_TRUE(at::equal(by_name.at("v"), full));
  fs::remove_all(folder);
}

TEST(ShardedCheckpoint, MissingOrDoubledEntriesAreAnErrorNamingTheTensor) {
  const fs::path folder = fs::temp_directory_path() / "titan_sharded_ckpt_missing";
  fs::remove_all(folder);
  std::map<std::string, std::string> store;
  const CheckpointStore ckpts(folder.string(), 0);
  // Rank 1 holds nothing of "w" (its piece was lost): rows 4..6 exist nowhere; both ranks wrote
  // the same piece of "u" (two replicas writing).
  for (int64_t rank : {1, 0}) {
    TrainingCheckpoint c;
    c.step = 1;
    CheckpointPart& model = c.part("model");
    if (rank == 0) {
      model.tensors.emplace_back("w", at::zeros({4, 2}));
      model.pieces["w"] = {{7, 2}, {0, 0}};
    }
    model.tensors.emplace_back("u", at::ones({2, 2}));
    model.pieces["u"] = {{2, 2}, {0, 0}};
    ckpts.save(c, coordination(rank, store));
  }
  const CheckpointReader reader(ckpts.step_dir(1));
  const std::string missing = testing::error_of([&] {
    reader.read_box("model", "w", {{2, 0}, {4, 2}});
  });
  EXPECT_NE(missing.find("entries [2:6, 0:2] of model tensor 'w' are not all"), std::string::npos)
      << missing;
  EXPECT_TRUE(at::equal(reader.read_box("model", "w", {{1, 0}, {2, 2}}), at::zeros({2, 2})));
  const std::string doubled = testing::error_of([&] { reader.read("model", "u"); });
  EXPECT_NE(doubled.find("more than once"), std::string::npos) << doubled;
  fs::remove_all(folder);
}

// A manifest of format version 1 (before boxes): row pieces, read as boxes.
TEST(ShardedCheckpoint, FormatVersionOneStillLoads) {
  const fs::path dir = fs::temp_directory_path() / "titan_ckpt_v1" / "step-3";
  fs::remove_all(dir.parent_path());
  {
    std::map<std::string, std::string> store;
    const CheckpointStore ckpts(dir.parent_path().string(), 0);
    for (int64_t rank : {1, 0}) {
      TrainingCheckpoint c;
      c.step = 3;
      CheckpointPart& model = c.part("model");
      model.tensors.emplace_back("w", at::full({2, 3}, static_cast<double>(rank)));
      model.pieces["w"] = {{4, 3}, {2 * rank, 0}};
      ckpts.save(c, coordination(rank, store));
    }
  }
  // Rewrite the manifest as the previous format wrote it: version 1, no mesh.
  nlohmann::json manifest = nlohmann::json::parse(std::ifstream(dir / "manifest.json"));
  manifest["format_version"] = 1;
  manifest.erase("mesh");
  std::ofstream(dir / "manifest.json") << manifest.dump(2);
  const CheckpointReader reader(dir.string());
  const at::Tensor expected = at::cat({at::zeros({2, 3}), at::ones({2, 3})});
  EXPECT_TRUE(at::equal(reader.read("model", "w"), expected));
  manifest["format_version"] = 9;
  std::ofstream(dir / "manifest.json") << manifest.dump(2);
  EXPECT_NE(testing::error_of([&] {
              CheckpointReader again(dir.string());
            }).find("unsupported format_version 9"),
            std::string::npos);
  fs::remove_all(dir.parent_path());
}

}  // namespace
}  // namespace titan::checkpoint
