// The checkpoint manager in one process: the parts it is given are saved on the interval and at
// the last step, resumed from the newest complete checkpoint (or checkpoint.load_step), parts
// named in exclude_from_loading stay as they are, old checkpoints are pruned to
// keep_latest_k, and a background save is the same as a synchronous one.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <filesystem>
#include <fstream>

#include "error_of.h"
#include "titan/train/state/checkpoint_manager.h"

namespace titan::train {
namespace {

namespace fs = std::filesystem;
using titan::testing::error_of;

// A part holding one tensor and a counter.
class Counter : public Stateful {
 public:
  at::Tensor value = at::zeros({3, 2});
  int64_t count = 0;
  PartState save() const override { return {{{"value", value}}, {{"count", count}}}; }
  void load(const PartReader& in) override {
    in.read_into("value", value);
    count = in.state().at("count").get<int64_t>();
  }
};

class CheckpointManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    folder_ = fs::temp_directory_path() /
              ("titan-ckpt-test-" + std::to_string(::getpid()) + "-" +
               ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(folder_);
    cfg_.job.dump_folder = folder_.string();
    cfg_.checkpoint.enable = true;
    cfg_.checkpoint.interval = 2;
  }
  void TearDown() override { fs::remove_all(folder_); }

  // Runs `steps` steps, each setting both parts to the step's values.
  void train(CheckpointManager& manager, Counter& a, Counter& b, int64_t steps) {
    for (int64_t step = 1; step <= steps; ++step) {
      a.value.fill_(static_cast<double>(step));
      a.count = step;
      b.value.fill_(static_cast<double>(-step));
      b.count = -step;
      manager.maybe_save(step, step == steps);
    }
    manager.finish();
  }

  fs::path folder_;
  config::TrainerConfig cfg_;
};

TEST_F(CheckpointManagerTest, ResumesTheNewestCompleteCheckpointPartByPart) {
  for (const char* mode : {"disabled", "async"}) {
    fs::remove_all(folder_);
    cfg_.checkpoint.async_mode = mode;
    Counter a, b;
    {
      CheckpointManager manager(cfg_, {{"model", &a}, {"optimizer", &b}});
      train(manager, a, b, 5);  // saves 2, 4 and the last, 5
    }
    Counter a2, b2;
    CheckpointManager manager(cfg_, {{"model", &a2}, {"optimizer", &b2}});
    ASSERT_EQ(manager.resumable_step(), std::optional<int64_t>(5)) << mode;
    manager.resume(5);
    EXPECT_TRUE(at::equal(a2.value, a.value)) << mode;
    EXPECT_EQ(a2.count, 5) << mode;
    EXPECT_EQ(b2.count, -5) << mode;
  }
}

// A torchtitan step-N (a DCP .metadata) in the checkpoint folder is resumable as titan's own
// steps are (the newest of either kind, or the one checkpoint.load_step names), and titan's
// pruning (keep_latest_k) never removes it.
TEST_F(CheckpointManagerTest, TorchtitanStepsAreResumableAndNeverPruned) {
  const fs::path torchtitan = folder_ / "checkpoint" / "step-3";
  fs::create_directories(torchtitan);
  std::ofstream(torchtitan / ".metadata") << "";
  cfg_.checkpoint.keep_latest_k = 1;
  Counter a, b;
  {
    CheckpointManager manager(cfg_, {{"model", &a}, {"optimizer", &b}});
    EXPECT_EQ(manager.resumable_step(), std::optional<int64_t>(3));
    EXPECT_TRUE(manager.is_torchtitan_step(3));
    train(manager, a, b, 4);  // saves 2 and 4, and keeps titan's newest
  }
  CheckpointManager manager(cfg_, {{"model", &a}, {"optimizer", &b}});
  EXPECT_EQ(manager.resumable_step(), std::optional<int64_t>(4));
  EXPECT_FALSE(manager.is_torchtitan_step(4));
  EXPECT_FALSE(fs::exists(folder_ / "checkpoint" / "step-2"));
  EXPECT_EQ(torchtitan_steps((folder_ / "checkpoint").string()), std::vector<int64_t>{3});
  cfg_.checkpoint.load_step = 3;
  EXPECT_EQ(manager.resumable_step(), std::optional<int64_t>(3));
}

TEST_F(CheckpointManagerTest, ExcludedPartsAndAChosenStep) {
  Counter a, b;
  {
    CheckpointManager manager(cfg_, {{"model", &a}, {"optimizer", &b}});
    train(manager, a, b, 4);
  }
  cfg_.checkpoint.load_step = 2;
  cfg_.checkpoint.exclude_from_loading = {"optimizer"};
  Counter a2, b2;
  b2.count = 99;
  CheckpointManager manager(cfg_, {{"model", &a2}, {"optimizer", &b2}});
  ASSERT_EQ(manager.resumable_step(), std::optional<int64_t>(2));
  manager.resume(2);
  EXPECT_EQ(a2.count, 2);
  EXPECT_EQ(a2.value[0][0].item<double>(), 2.0);
  EXPECT_EQ(b2.count, 99);        // not loaded
  cfg_.checkpoint.load_step = 3;  // never saved
  const std::string message = error_of([&] { manager.resumable_step(); });
  EXPECT_NE(message.find("checkpoint.load_step 3"), std::string::npos) << message;
}

TEST_F(CheckpointManagerTest, KeepsTheLatestKAndNothingWhenOff) {
  cfg_.checkpoint.keep_latest_k = 2;
  Counter a, b;
  {
    CheckpointManager manager(cfg_, {{"model", &a}, {"optimizer", &b}});
    train(manager, a, b, 8);  // 2, 4, 6, 8
  }
  std::vector<std::string> kept;
  for (const auto& entry : fs::directory_iterator(folder_ / "checkpoint"))
    kept.push_back(entry.path().filename().string());
  std::sort(kept.begin(), kept.end());
  EXPECT_EQ(kept, (std::vector<std::string>{"step-6", "step-8"}));

  fs::remove_all(folder_);
  cfg_.checkpoint.enable = false;
  CheckpointManager off(cfg_, {{"model", &a}});
  train(off, a, b, 4);
  EXPECT_FALSE(fs::exists(folder_ / "checkpoint"));
  EXPECT_EQ(off.resumable_step(), std::nullopt);
}

}  // namespace
}  // namespace titan::train
