// Round trips through write_safetensors and SafetensorsFile / SafetensorsDirectory, the
// reference writer's layout rules, and the reader's rejection of damaged files. The byte-level
// comparison with Python's safetensors is in tests/integration/test_safetensors_roundtrip.py.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "titan/checkpoint/safetensors.h"
#include "titan/common/error.h"
#include "titan/common/file_util.h"

namespace titan::checkpoint {
namespace {

namespace fs = std::filesystem;

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("titan_st_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

std::vector<std::pair<std::string, at::Tensor>> every_dtype() {
  at::manual_seed(0);
  auto f = at::randn({3, 5});
  return {
      {"f32", f},
      {"bf16", f.to(at::kBFloat16)},
      {"f16", f.to(at::kHalf)},
      {"f64", at::randn({2, 2}, at::kDouble)},
      {"i64", at::randint(-1000, 1000, {4}, at::kLong)},
      {"i32", at::randint(-1000, 1000, {4, 1}, at::kInt)},
      {"i16", at::randint(-1000, 1000, {3}, at::kShort)},
      {"i8", at::randint(-100, 100, {5}, at::kChar)},
      {"u8", at::randint(0, 255, {6}, at::kByte)},
      {"bool", at::randint(0, 2, {7}).to(at::kBool)},
      {"scalar", at::scalar_tensor(3.5)},
      {"empty", at::empty({0, 4})},
  };
}

uint64_t header_length(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  return n;
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST_F(SafetensorsTest, RoundTripsEveryDtypeExactly) {
  auto tensors = every_dtype();
  write_safetensors(path("a.safetensors"), tensors);
  SafetensorsFile file = SafetensorsFile::open(path("a.safetensors"));
  EXPECT_EQ(file.metadata(), (std::map<std::string, std::string>{{"format", "pt"}}));
  ASSERT_EQ(file.tensors().size(), tensors.size());
  for (const auto& [name, expected] : tensors) {
    at::Tensor got = file.tensor(name);
    EXPECT_EQ(got.scalar_type(), expected.scalar_type()) << name;
    EXPECT_EQ(got.sizes(), expected.sizes()) << name;
    EXPECT_TRUE(at::equal(got, expected)) << name;
    EXPECT_EQ(file.info(name).dtype, safetensors_dtype_name(expected.scalar_type()));
  }
}

TEST_F(SafetensorsTest, LayoutFollowsTheReferenceWriter) {
  write_safetensors(path("a.safetensors"), every_dtype(), {{"format", "pt"}, {"k", "v\n\"x"}});
  SafetensorsFile file = SafetensorsFile::open(path("a.safetensors"));
  const uint64_t n = header_length(path("a.safetensors"));
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(fs::file_size(path("a.safetensors")), 8 + n + file.tensors().back().end);
  // Larger elements first; each tensor starts where the previous one ends and is aligned.
  const auto& t = file.tensors();
  for (size_t i = 1; i < t.size(); ++i) {
    EXPECT_EQ(t[i].begin, t[i - 1].end);
    const size_t prev = at::elementSize(scalar_type_from_safetensors(t[i - 1].dtype));
    const size_t cur = at::elementSize(scalar_type_from_safetensors(t[i].dtype));
    EXPECT_GE(prev, cur) << t[i - 1].name << " before " << t[i].name;
    EXPECT_EQ((8 + n + t[i].begin) % cur, 0u) << t[i].name;
  }
  EXPECT_EQ(file.metadata().at("k"), "v\n\"x");
}

TEST_F(SafetensorsTest, NonContiguousTensorsAreWrittenAsTheirValues) {
  at::Tensor base = at::arange(24, at::kFloat).reshape({4, 6});
  at::Tensor view = base.t().slice(0, 1, 5);
  write_safetensors(path("v.safetensors"), {{"view", view}});
  EXPECT_TRUE(at::equal(SafetensorsFile::open(path("v.safetensors")).tensor("view"), view));
}

TEST_F(SafetensorsTest, TensorsKeepTheMappingAliveAndWritesStayPrivate) {
  write_safetensors(path("a.safetensors"), {{"x", at::ones({1000})}});
  at::Tensor x;
  {
    SafetensorsFile file = SafetensorsFile::open(path("a.safetensors"));
    x = file.tensor("x");
  }
  EXPECT_EQ(x.sum().item<float>(), 1000.0f);  // still readable after the file object is gone
  x.fill_(2.0f);                              // copy-on-write: the file is not changed
  EXPECT_TRUE(
      at::equal(SafetensorsFile::open(path("a.safetensors")).tensor("x"), at::ones({1000})));
}

TEST_F(SafetensorsTest, ReplacesAnExistingFileAndLeavesNoTemporaries) {
  write_safetensors(path("a.safetensors"), {{"x", at::zeros({3})}});
  write_safetensors(path("a.safetensors"), {{"y", at::ones({2})}});
  SafetensorsFile file = SafetensorsFile::open(path("a.safetensors"));
  EXPECT_FALSE(file.contains("x"));
  EXPECT_TRUE(file.contains("y"));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

TEST_F(SafetensorsTest, TruncatedFileIsRejectedNamingTheFile) {
  write_safetensors(path("a.safetensors"), {{"x", at::randn({100})}});
  fs::resize_file(path("a.safetensors"), fs::file_size(path("a.safetensors")) - 4);
  std::string message = error_of([&] { SafetensorsFile::open(path("a.safetensors")); });
  EXPECT_NE(message.find(path("a.safetensors")), std::string::npos) << message;
  EXPECT_NE(message.find("truncated"), std::string::npos) << message;
}

TEST_F(SafetensorsTest, MissingTensorAndUnsupportedDtypeNameThemselves) {
  write_safetensors(path("a.safetensors"), {{"x", at::randn({2})}});
  SafetensorsFile file = SafetensorsFile::open(path("a.safetensors"));
  EXPECT_NE(error_of([&] { file.tensor("nope"); }).find("'nope'"), std::string::npos);
  EXPECT_NE(error_of([&] { safetensors_dtype_name(at::kComplexDouble); }).find("ComplexDouble"),
            std::string::npos);
  EXPECT_NE(error_of([&] { scalar_type_from_safetensors("Q7"); }).find("Q7"), std::string::npos);
}

TEST_F(SafetensorsTest, DirectoryReadsShardsAndRejectsKeysInTwoShards) {
  fs::create_directories(dir_ / "hf");
  write_safetensors(path("hf/model-00001-of-00002.safetensors"), {{"a", at::randn({2})}});
  write_safetensors(path("hf/model-00002-of-00002.safetensors"),
                    {{"b", at::randn({3})}, {"c", at::randn({1})}});
  write_file_atomic(path("hf/model.safetensors.index.json"),
                    R"({"metadata": {}, "weight_map": {"a": "model-00001-of-00002.safetensors",
                        "b": "model-00002-of-00002.safetensors",
                        "c": "model-00002-of-00002.safetensors"}})");
  SafetensorsDirectory weights = SafetensorsDirectory::open(path("hf"));
  EXPECT_EQ(weights.keys(), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(weights.tensor("b").numel(), 3);
  EXPECT_NE(error_of([&] { weights.tensor("d"); }).find("'d'"), std::string::npos);

  write_safetensors(path("hf/model-00001-of-00002.safetensors"),
                    {{"a", at::randn({2})}, {"b", at::randn({3})}});
  std::string message = error_of([&] { SafetensorsDirectory::open(path("hf")); });
  EXPECT_NE(message.find("'b'"), std::string::npos) << message;
  EXPECT_NE(message.find("exactly one shard"), std::string::npos) << message;
}

TEST_F(SafetensorsTest, AtomicFileWithoutCommitLeavesNothing) {
  {
    AtomicFile file(path("partial.bin"));
    file.write("half of it");
  }
  EXPECT_TRUE(fs::is_empty(dir_));
}

}  // namespace
}  // namespace titan::checkpoint
