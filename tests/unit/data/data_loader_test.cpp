// Packing and loading: windows of seq_len + 1 tokens from the stream of documents + eos, shifted
// inputs/labels, disjoint data-parallel shards, exact resume, and clear errors.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_helpers.h"
#include "titan/common/error.h"
#include "titan/data/data_loader.h"
#include "titan/data/token_shard_format.h"
#include "titan/data/token_shards.h"

namespace titan::data {
namespace {

using testing::qwen3_tokenizer;
using testing::TempFile;

const std::vector<std::string> kDocs = {"The first document.", "def second(x):\n    return x\n",
                                        "第三个文档", "fourth: 1234567",
                                        "fifth <|im_start|>doc<|im_end|>"};

std::string jsonl(const std::vector<std::string>& docs) {
  std::string out;
  for (const auto& d : docs) out += nlohmann::json({{"text", d}}).dump() + "\n";
  return out;
}

int32_t eos() { return qwen3_tokenizer()->token_to_id("<|endoftext|>"); }

// The stream a rank must see: its documents' ids, each followed by eos, repeated.
std::vector<int64_t> expected_stream(int64_t rank, int64_t world, size_t length) {
  std::vector<int64_t> out;
  while (out.size() < length) {
    for (size_t i = rank; i < kDocs.size(); i += world) {
      for (int32_t id : qwen3_tokenizer()->encode(kDocs[i])) out.push_back(id);
      out.push_back(eos());
    }
  }
  out.resize(length);
  return out;
}

std::vector<int64_t> row(const at::Tensor& t, int64_t r) {
  const auto c = t[r].contiguous();
  return {c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel()};
}

TEST(DataLoader, WindowsOfTheDocumentStreamShiftedByOne) {
  TempFile file("docs.jsonl", jsonl(kDocs));
  const int64_t B = 3, S = 7, steps = 6;  // long enough to wrap around the corpus
  DataLoader loader(qwen3_tokenizer(), file.path(), B, S, eos());
  const auto stream = expected_stream(0, 1, steps * B * (S + 1));
  for (int64_t step = 0; step < steps; ++step) {
    const Batch b = loader.next();
    ASSERT_EQ(b.inputs.sizes(), (at::IntArrayRef{B, S}));
    ASSERT_EQ(b.labels.scalar_type(), at::kLong);
    for (int64_t r = 0; r < B; ++r) {
      const auto begin = stream.begin() + (step * B + r) * (S + 1);
      EXPECT_EQ(row(b.inputs, r), std::vector<int64_t>(begin, begin + S));
      EXPECT_EQ(row(b.labels, r), std::vector<int64_t>(begin + 1, begin + S + 1));
    }
  }
}

// The loader of row rank r of R over local batches of B rows.
LoaderOptions rows_of(int64_t rank, int64_t ranks, int64_t B, int64_t S) {
  LoaderOptions o;
  o.local_batch_size = B;
  o.seq_len = S;
  o.eos_id = eos();
  o.row_rank = rank;
  o.row_ranks = ranks;
  return o;
}

TEST(DataLoader, RowRanksTakeTheirRowsOfEveryGlobalBatch) {
  TempFile file("docs.jsonl", jsonl(kDocs));
  const int64_t S = 5;
  const auto stream = expected_stream(0, 1, 16 * (S + 1));
  for (int64_t rank = 0; rank < 2; ++rank) {
    DataLoader loader(qwen3_tokenizer(), file.path(), rows_of(rank, 2, 1, S));
    for (int64_t step = 0; step < 8; ++step) {
      // Global batch `step` is windows 2 step and 2 step + 1 of the one stream.
      const auto begin = stream.begin() + (2 * step + rank) * (S + 1);
      EXPECT_EQ(row(loader.next().inputs, 0), std::vector<int64_t>(begin, begin + S));
    }
  }
}

TEST(DataLoader, LoadStateResumesTheSameBatches) {
  TempFile file("docs.jsonl", jsonl(kDocs));
  DataLoader first(qwen3_tokenizer(), file.path(), rows_of(1, 2, 2, 6));
  for (int i = 0; i < 3; ++i) first.next();
  const nlohmann::json saved = nlohmann::json::parse(first.state().dump());  // via text, as saved
  std::vector<Batch> expected;
  for (int i = 0; i < 5; ++i) expected.push_back(first.next());

  DataLoader resumed(qwen3_tokenizer(), file.path(), rows_of(1, 2, 2, 6));
  resumed.load_state(saved);
  for (const Batch& e : expected) {
    const Batch b = resumed.next();
    EXPECT_TRUE(at::equal(b.inputs, e.inputs));
    EXPECT_TRUE(at::equal(b.labels, e.labels));
  }
  // The position is the same on every rank: another row rank (a resume under another layout)
  // resumes at the same global batch and takes its own rows of it.
  DataLoader other_rank(qwen3_tokenizer(), file.path(), rows_of(0, 2, 2, 6));
  other_rank.load_state(saved);
  DataLoader one(qwen3_tokenizer(), file.path(), rows_of(0, 1, 4, 6));
  one.load_state(saved);
  const Batch whole = one.next(), zero = other_rank.next(), mine = expected.front();
  EXPECT_TRUE(at::equal(whole.inputs, at::cat({zero.inputs, mine.inputs})));
  // A state from the old striding of documents over several ranks is refused.
  nlohmann::json striding = saved;
  striding["dp_rank"] = 1;
  striding["dp_world"] = 2;
  EXPECT_THROW(resumed.load_state(striding), titan::Error);
}

TEST(DataLoader, TextFileIsOneDocument) {
  const std::string text = "line one\nline two\n";
  TempFile file("doc.txt", text);
  DataLoader loader(qwen3_tokenizer(), file.path(), 1, 3, eos());
  auto ids = qwen3_tokenizer()->encode(text);
  ids.push_back(eos());
  const auto b = loader.next();
  EXPECT_EQ(row(b.inputs, 0), std::vector<int64_t>(ids.begin(), ids.begin() + 3));
}

std::string construction_error(const std::string& path) {
  try {
    DataLoader(qwen3_tokenizer(), path, 1, 4, eos());
  } catch (const titan::Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(DataLoader, MissingAndEmptyDatasetsAreErrorsNamingTheFile) {
  EXPECT_NE(construction_error("/nonexistent/data.jsonl").find("/nonexistent/data.jsonl"),
            std::string::npos);
  TempFile empty("empty.jsonl", "");
  EXPECT_NE(construction_error(empty.path()).find(empty.path()), std::string::npos);
  TempFile blank("blank.jsonl", "\n  \n{\"text\": \"\"}\n");
  EXPECT_NE(construction_error(blank.path()).find("empty"), std::string::npos);
  TempFile empty_txt("empty.txt", "");
  EXPECT_NE(construction_error(empty_txt.path()).find(empty_txt.path()), std::string::npos);
}

TEST(DataLoader, BadLineNamesFileAndLine) {
  TempFile file("bad.jsonl", "{\"text\": \"ok\"}\n\n{\"txt\": \"no text\"}\n");
  DataLoader loader(qwen3_tokenizer(), file.path(), 1, 64, eos());
  try {
    loader.next();
    FAIL() << "expected an error";
  } catch (const titan::Error& e) {
    EXPECT_NE(std::string(e.what()).find(file.path() + ":3"), std::string::npos) << e.what();
  }
}

TEST(TokenShards, ShardsHoldTheDocumentStream) {
  TempFile file("docs.jsonl", jsonl(kDocs));
  const std::string prefix = (file.dir() / "shards" / "corpus").string();
  const auto meta = write_token_shards(*qwen3_tokenizer(), {file.path()}, prefix, eos(), 16);
  std::vector<int64_t> all;
  for (const auto& shard : meta["shards"]) {
    const std::string path = (file.dir() / "shards" / shard["file"].get<std::string>()).string();
    std::ifstream in(path, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const TokenShardView view(path, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    EXPECT_EQ(view.documents(), shard["documents"].get<int64_t>());
    std::vector<int32_t> ids;
    for (int64_t d = 0; d < view.documents(); ++d) view.append_document(d, ids);
    EXPECT_EQ(static_cast<int64_t>(ids.size()), shard["tokens"].get<int64_t>());
    all.insert(all.end(), ids.begin(), ids.end());
  }
  EXPECT_GT(meta["shards"].size(), 1u);
  EXPECT_EQ(meta["documents"].get<size_t>(), kDocs.size());
  EXPECT_EQ(all, expected_stream(0, 1, all.size()));
  EXPECT_EQ(all.size(), meta["tokens"].get<size_t>());
  EXPECT_TRUE(std::filesystem::exists(prefix + ".json"));
  // Training on the shards sees the batches of the text they came from.
  DataLoader from_text(qwen3_tokenizer(), file.path(), rows_of(1, 2, 2, 5));
  DataLoader from_shards(qwen3_tokenizer(), prefix + ".json", rows_of(1, 2, 2, 5));
  for (int step = 0; step < 4; ++step) {
    const Batch a = from_text.next(), b = from_shards.next();
    EXPECT_TRUE(a.inputs.equal(b.inputs) && a.labels.equal(b.labels)) << step;
  }
}

}  // namespace
}  // namespace titan::data
