// torch.distributed.checkpoint (DCP) folders: the restricted unpickler refuses what a checkpoint
// never holds (and anything that would run), titan's writer and reader agree, and a damaged item
// is an error naming it. The comparison with torch's own DCP and with torchtitan 0.3.0 is in
// tests/integration/test_torchtitan_checkpoints.py.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "error_of.h"
#include "titan/checkpoint/dcp_reader.h"
#include "titan/checkpoint/dcp_writer.h"
#include "titan/checkpoint/pickle_writer.h"
#include "titan/checkpoint/restricted_unpickler.h"
#include "titan/common/error.h"

namespace titan::checkpoint {
namespace {

namespace fs = std::filesystem;
using namespace std::string_literals;
using pickle::Admits;
using titan::testing::error_of;
using Kind = pickle::Value::Kind;

pickle::ValuePtr read(const std::string& bytes, Admits admits = Admits::kPlainData) {
  return pickle::unpickle(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), admits,
                          "test.pkl");
}

TEST(RestrictedUnpickler, RefusesAGlobalThatWouldRunAndNamesIt) {
  // pickle.dumps of an object whose __reduce__ is (os.system, ("touch marker",)), protocol 2
  // and (STACK_GLOBAL) protocol 4.
  const std::string p2 =
      "\x80\x02"
      "cposix\nsystem\nq\x00X\x0c\x00\x00\x00touch markerq\x01\x85q\x02Rq\x03."s;
  const std::string p4 =
      "\x80\x04\x95\x25\x00\x00\x00\x00\x00\x00\x00\x8c\x05posix\x94\x8c\x06system\x94\x93"
      "\x94\x8c\x0c"
      "touch marker\x94\x85\x94R\x94."s;
  for (const Admits admits : {Admits::kPlainData, Admits::kDcpMetadata, Admits::kTensor}) {
    const std::string e2 = error_of([&] { read(p2, admits); });
    EXPECT_NE(e2.find("test.pkl: refused to read this pickle: it names the global posix.system"),
              std::string::npos)
        << e2;
    EXPECT_NE(e2.find("nothing in it was run"), std::string::npos) << e2;
    EXPECT_NE(error_of([&] { read(p4, admits); }).find("posix.system"), std::string::npos);
  }
  // builtins.eval through INST, an opcode DCP never uses.
  const std::string inst = "(ibuiltins\neval\n(S'1'\ntR.";
  EXPECT_NE(error_of([&] { read(inst); }).find("pickle opcode 0x69"), std::string::npos);
}

TEST(RestrictedUnpickler, AdmitsDcpClassesOnlyInMetadata) {
  pickle::PickleWriter w;
  w.new_object("torch.distributed.checkpoint.metadata", "BytesStorageMetadata");
  w.empty_dict();
  w.build();
  const std::string bytes = w.finish();
  EXPECT_EQ(read(bytes, Admits::kDcpMetadata)->text, "BytesStorageMetadata");
  EXPECT_NE(error_of([&] {
              read(bytes, Admits::kPlainData);
            }).find("torch.distributed.checkpoint.metadata.BytesStorageMetadata"),
            std::string::npos);
}

TEST(RestrictedUnpickler, ReadsPlainDataBackAsWritten) {
  pickle::PickleWriter w;
  w.json({{"lr", 8e-4},
          {"step", 123456789012},
          {"neg", -7},
          {"name", "Zürich"},
          {"flags", {true, false, nullptr}},
          {"nested", {{"k", {1, 2, 70000}}}}});
  const pickle::ValuePtr v = read(w.finish());
  ASSERT_EQ(v->kind, Kind::kDict);
  EXPECT_DOUBLE_EQ(v->get("lr")->real, 8e-4);
  EXPECT_EQ(v->get("step")->integer, 123456789012);
  EXPECT_EQ(v->get("neg")->integer, -7);
  EXPECT_EQ(v->get("name")->text, "Zürich");
  EXPECT_EQ(v->get("flags")->items.size(), 3u);
  EXPECT_TRUE(v->get("flags")->items[0]->boolean);
  EXPECT_TRUE(v->get("flags")->items[2]->is_none());
  EXPECT_EQ(v->get("nested")->get("k")->items[2]->integer, 70000);
  pickle::PickleWriter b;
  b.bytes(std::string("\x00\x80\xff", 3));
  const pickle::ValuePtr raw = read(b.finish());
  ASSERT_EQ(raw->kind, Kind::kBytes);
  EXPECT_EQ(raw->text, std::string("\x00\x80\xff", 3));
}

TEST(RestrictedUnpickler, RefusesCyclesDeepNestingAndTruncation) {
  // EMPTY_LIST, BINPUT 0, BINGET 0, APPEND: a list inside itself.
  EXPECT_NE(error_of([] {
              read(
                  "\x80\x02]q\x00h\x00"
                  "a."s);
            }).find("contains itself"),
            std::string::npos);
  // A list put into another, then changed through the memo.
  EXPECT_NE(error_of([] {
              read(
                  "\x80\x02]q\x00]h\x00"
                  "ah\x00K\x01"
                  "a."s);
            }).find("already part of"),
            std::string::npos);
  std::string deep = "\x80\x02";
  for (int i = 0; i < 200; ++i) deep += "]";
  for (int i = 0; i < 199; ++i) deep += "a";
  deep += ".";
  EXPECT_NE(error_of([&] { read(deep); }).find("nested more than"), std::string::npos);
  EXPECT_NE(error_of([] {
              read(
                  "\x80\x02X\xff\x00\x00\x00"
                  "ab."s);
            }).find("truncated"),
            std::string::npos);
}

class DcpFolderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("titan_dcp_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(DcpFolderTest, WriterAndReaderAgree) {
  at::manual_seed(0);
  const at::Tensor w = at::randn({3, 5});
  const at::Tensor half = at::randn({4}).to(at::kBFloat16);
  const at::Tensor step = at::scalar_tensor(7.0);
  DcpWriter writer;
  writer.add_tensor("w", w);
  writer.add_tensor("optimizer.state.w.exp_avg_sq", half, {"optimizer", "state.w.exp_avg_sq"});
  writer.add_tensor("step", step);
  writer.add_tensor("strided", at::arange(6, at::kFloat).reshape({2, 3}).t());
  writer.add_item("train_state.step", 12, {"train_state", "step"});
  writer.add_item("lr_scheduler.info", {{"a", 1.5}, {"b", {1, 2}}});
  writer.write(dir_.string());
  ASSERT_TRUE(is_dcp_checkpoint(dir_.string()));
  const DcpReader reader(dir_.string());
  EXPECT_EQ(reader.metadata().tensors.at("w").dtype, "float32");
  EXPECT_EQ(reader.metadata().tensors.at("w").size, (std::vector<int64_t>{3, 5}));
  EXPECT_TRUE(at::equal(reader.tensor("w"), w));
  EXPECT_TRUE(at::equal(reader.tensor("optimizer.state.w.exp_avg_sq"), half));
  EXPECT_EQ(reader.tensor("step").dim(), 0);
  EXPECT_EQ(reader.tensor("step").item<float>(), 7.0f);
  EXPECT_TRUE(at::equal(reader.tensor("strided"), at::arange(6, at::kFloat).reshape({2, 3}).t()));
  EXPECT_EQ(reader.item("train_state.step")->integer, 12);
  EXPECT_DOUBLE_EQ(reader.item("lr_scheduler.info")->get("a")->real, 1.5);
}

TEST_F(DcpFolderTest, ADamagedItemIsAnErrorNamingIt) {
  DcpWriter writer;
  writer.add_tensor("w", at::ones({64, 64}));
  writer.write(dir_.string());
  // Cut the data file short: the item lies past its end.
  const fs::path data = dir_ / "__0_0.distcp";
  fs::resize_file(data, fs::file_size(data) / 2);
  const DcpReader reader(dir_.string());
  const std::string e = error_of([&] { reader.tensor("w"); });
  EXPECT_NE(e.find("__0_0.distcp (w)"), std::string::npos) << e;
  EXPECT_NE(e.find("past the end"), std::string::npos) << e;
  fs::remove(data);
  const DcpReader incomplete(dir_.string());
  EXPECT_NE(error_of([&] { incomplete.tensor("w"); }).find("which is not there"),
            std::string::npos);
}

}  // namespace
}  // namespace titan::checkpoint
