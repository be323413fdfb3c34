// HF export with a stand-in model: sharding invariants, the index, config floats, the atomic
// replacement of the output directory. The comparison with huggingface_hub's shard planner and
// with transformers loading the directory is in tests/integration/test_hf_export.py.
#include <gtest/gtest.h>

#include <filesystem>

#include "../../tools/tensor_list_model.h"
#include "titan/checkpoint/hf_export.h"
#include "titan/checkpoint/safetensors.h"
#include "titan/common/error.h"
#include "titan/common/file_util.h"

namespace titan::checkpoint {
namespace {

namespace fs = std::filesystem;
using test_support::identity_spec;
using test_support::TensorListModel;

class HfExportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("titan_hf_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
};

NamedTensors toy_tensors() {
  at::manual_seed(1);
  return {
      {"model.embed_tokens.weight", at::randn({64, 16})},  // 2048 bytes in bf16
      {"model.layers.0.input_layernorm.weight", at::randn({16})},
      {"model.layers.0.self_attn.q_proj.weight", at::randn({16, 16})},
      {"model.layers.0.mlp.down_proj.weight", at::randn({16, 32})},
      {"model.norm.weight", at::randn({16})},
  };
}

nlohmann::json toy_config() {
  return {{"model_type", "qwen3"}, {"rms_norm_eps", 1e-6}, {"initializer_range", 0},
          {"bos_token_id", 1},     {"eos_token_id", 2},    {"transformers_version", "5.17.0"}};
}

TEST_F(HfExportTest, ShardPlanKeepsOrderAndLimits) {
  const std::vector<uint64_t> sizes = {30, 50, 200, 40, 60, 10};
  const auto shards = plan_shards(sizes, 100);
  std::vector<size_t> seen;
  for (const auto& shard : shards) {
    uint64_t bytes = 0;
    for (size_t i : shard) bytes += sizes[i];
    EXPECT_TRUE(bytes <= 100 || shard.size() == 1);
    seen.insert(seen.end(), shard.begin(), shard.end());
  }
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<size_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(plan_shards(sizes, 1000).size(), 1u);
}

TEST_F(HfExportTest, ShardedExportReadsBackAsTheCastTensors) {
  TensorListModel model(toy_tensors(), toy_config());
  const std::string out = (dir_ / "hf").string();
  export_hf_directory(model, identity_spec(), out, "bfloat16", 2500, "");
  ASSERT_TRUE(fs::exists(dir_ / "hf" / "model.safetensors.index.json"));
  EXPECT_FALSE(fs::exists(dir_ / "hf" / "model.safetensors"));
  SafetensorsDirectory weights = SafetensorsDirectory::open(out);
  for (const auto& [name, tensor] : toy_tensors()) {
    at::Tensor got = weights.tensor(name);
    EXPECT_EQ(got.scalar_type(), at::kBFloat16) << name;
    EXPECT_TRUE(at::equal(got, tensor.to(at::kBFloat16))) << name;
  }
  auto index = nlohmann::json::parse(read_text_file(out + "/model.safetensors.index.json"));
  uint64_t total = 0, params = 0;
  for (const auto& [name, tensor] : toy_tensors()) {
    total += tensor.numel() * 2;
    params += tensor.numel();
  }
  EXPECT_EQ(index["metadata"]["total_size"].get<uint64_t>(), total);
  EXPECT_EQ(index["metadata"]["total_parameters"].get<uint64_t>(), params);

  auto config = nlohmann::json::parse(read_text_file(out + "/config.json"));
  EXPECT_TRUE(config["initializer_range"].is_number_float());
  EXPECT_EQ(config["dtype"], "bfloat16");
  auto generation = nlohmann::json::parse(read_text_file(out + "/generation_config.json"));
  EXPECT_EQ(generation["eos_token_id"], 2);
}

TEST_F(HfExportTest, ReplacesAnExistingExportOnlyWhenComplete) {
  const std::string out = (dir_ / "hf").string();
  TensorListModel model(toy_tensors(), toy_config());
  export_hf_directory(model, identity_spec(), out, "bfloat16", 2500, "");
  // A failing export (bad dtype) leaves the previous export as it was, and no temporaries.
  EXPECT_THROW(export_hf_directory(model, identity_spec(), out, "int4", 1000, ""), Error);
  EXPECT_TRUE(fs::exists(dir_ / "hf" / "model.safetensors.index.json"));
  // A successful one replaces it completely (one shard now: no index left behind).
  export_hf_directory(model, identity_spec(), out, "float32", parse_size("5GB"), "");
  EXPECT_TRUE(fs::exists(dir_ / "hf" / "model.safetensors"));
  EXPECT_FALSE(fs::exists(dir_ / "hf" / "model.safetensors.index.json"));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

TEST_F(HfExportTest, ParseSizeRejectsNonsenseNamingIt) {
  EXPECT_EQ(parse_size("123"), 123u);
  for (const char* bad : {"", "GB", "5XB", "-5GB", "1.2.3MB", "0"}) {
    try {
      parse_size(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("'") + bad + "'"), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace titan::checkpoint
