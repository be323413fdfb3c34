// Weighted dataset mixtures: the list syntax, exact proportions over a cycle, each source read in
// order and wrapping on its own, determinism, random access equal to sequential reading, token
// shards as an entry, resuming a loader, and errors naming the entry.
#include "titan/data/mixture_documents.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <random>

#include <nlohmann/json.hpp>

#include "../error_of.h"
#include "test_helpers.h"
#include "titan/common/error.h"
#include "titan/data/data_loader.h"
#include "titan/data/dataset_list.h"
#include "titan/data/token_shards.h"

namespace titan::data {
namespace {

using testing::qwen3_tokenizer;
using testing::TempFile;

int32_t eos() { return qwen3_tokenizer()->token_to_id("<|endoftext|>"); }

// Source s's document d is the ids {s, d}: enough to tell where each pick came from.
class NumberedDocuments : public TokenDocuments {
 public:
  NumberedDocuments(int32_t source, int64_t size)
      : source_(source), size_(size), path_("source" + std::to_string(source)) {}
  int64_t size() const override { return size_; }
  void read(int64_t index, std::vector<int32_t>& out) override {
    out = {source_, static_cast<int32_t>(index)};
  }
  const std::string& path() const override { return path_; }

 private:
  int32_t source_;
  int64_t size_;
  std::string path_;
};

MixtureDocuments numbered_mixture(const std::vector<int64_t>& sizes,
                                  const std::vector<double>& weights) {
  std::vector<MixtureDocuments::Source> sources;
  for (size_t i = 0; i < sizes.size(); ++i) {
    sources.push_back(
        {std::make_unique<NumberedDocuments>(static_cast<int32_t>(i), sizes[i]), weights[i]});
  }
  return MixtureDocuments("test mixture", std::move(sources));
}

TEST(DatasetList, ParsesPathsAndWeights) {
  auto e = parse_dataset_list("a.jsonl:0.7, b/*.jsonl.zst:0.3");
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(e[0].path, "a.jsonl");
  EXPECT_EQ(e[0].weight, 0.7);
  EXPECT_EQ(e[1].path, "b/*.jsonl.zst");
  EXPECT_EQ(e[1].weight, 0.3);
  EXPECT_FALSE(is_single_dataset(e));
  // Text after the last ':' that is no number belongs to the path (weight 1).
  e = parse_dataset_list("c:/data/x.jsonl,y.txt:2e0");
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(e[0].path, "c:/data/x.jsonl");
  EXPECT_EQ(e[0].weight, 1.0);
  EXPECT_FALSE(e[0].weighted);
  EXPECT_EQ(e[1].weight, 2.0);
  // One path without a weight is taken as written.
  e = parse_dataset_list(" data/x.jsonl");
  ASSERT_TRUE(is_single_dataset(e));
  EXPECT_EQ(e[0].path, " data/x.jsonl");
  e = parse_dataset_list("x.jsonl:3");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_FALSE(is_single_dataset(e));
  EXPECT_EQ(e[0].weight, 3.0);
}

using titan::testing::error_of;

TEST(DatasetList, BadEntriesAreErrorsNamingThem) {
  for (const std::string weight : {"0", "-1", "inf", "nan", "1e999", "-0"}) {
    const std::string list = "a.jsonl:1,b.jsonl:" + weight;
    const std::string message = error_of([&] { parse_dataset_list(list); });
    EXPECT_NE(message.find("entry 2 (\"b.jsonl:" + weight + "\")"), std::string::npos) << message;
    EXPECT_NE(message.find("positive finite"), std::string::npos) << message;
  }
  std::string message = error_of([&] { parse_dataset_list("a.jsonl,,b.jsonl"); });
  EXPECT_NE(message.find("entry 2 is empty"), std::string::npos) << message;
  message = error_of([&] { parse_dataset_list("a.jsonl,b.jsonl:"); });
  EXPECT_NE(message.find("entry 2 (\"b.jsonl:\")"), std::string::npos) << message;
}

TEST(MixtureCounts, SmallIntegerRatiosAreExact) {
  EXPECT_EQ(mixture_counts({0.7, 0.3}), (std::vector<int64_t>{7, 3}));
  EXPECT_EQ(mixture_counts({2, 1}), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(mixture_counts({0.5, 0.3, 0.2}), (std::vector<int64_t>{5, 3, 2}));
  EXPECT_EQ(mixture_counts({1, 1, 1}), (std::vector<int64_t>{1, 1, 1}));
  EXPECT_EQ(mixture_counts({1.0 / 3, 2.0 / 3}), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(mixture_counts({4}), (std::vector<int64_t>{1}));
  // Not a ratio of small integers: rounded to parts of 2^16 of the total.
  const auto c = mixture_counts({1.0, 3.14159265358979});
  const double share = static_cast<double>(c[0]) / static_cast<double>(c[0] + c[1]);
  EXPECT_NEAR(share, 1.0 / 4.14159265358979, 1.0 / 65536);
  EXPECT_EQ(mixture_counts({1e-300, 1.0}), (std::vector<int64_t>{1, 65536}));
}

TEST(MixtureDocuments, ProportionsAreExactOverEveryCycle) {
  const std::vector<double> weights = {0.5, 0.3, 0.2};
  const std::vector<int64_t> sizes = {3, 7, 2};
  auto mixture = numbered_mixture(sizes, weights);
  ASSERT_EQ(mixture.cycle_length(), 10);
  // One mixture epoch: the cycles until source 1 (7 documents, 3 a cycle) has given each.
  EXPECT_EQ(mixture.size(), 3 * 10);
  std::vector<int32_t> doc;
  std::vector<int64_t> next(sizes.size(), 0);  // each source's next document, in its own order
  std::vector<int64_t> in_cycle(sizes.size(), 0);
  for (int64_t k = 0; k < mixture.size(); ++k) {
    mixture.read(k, doc);
    ASSERT_EQ(doc.size(), 2u);
    const auto s = static_cast<size_t>(doc[0]);
    EXPECT_EQ(doc[1], next[s] % sizes[s]) << "pick " << k;
    ++next[s];
    ++in_cycle[s];
    if ((k + 1) % 10 == 0) {
      for (size_t i = 0; i < weights.size(); ++i) {
        EXPECT_DOUBLE_EQ(static_cast<double>(in_cycle[i]) / 10.0, weights[i]) << "source " << i;
      }
      std::fill(in_cycle.begin(), in_cycle.end(), 0);
    }
  }
  EXPECT_GE(next[1], sizes[1]);  // every document of every source was read
}

TEST(MixtureDocuments, PicksAreSpreadThroughTheCycle) {
  // 7 : 3 - no source waits more than ceil(10 / 3) picks, unlike 7 then 3 in a row.
  auto mixture = numbered_mixture({100, 100}, {0.7, 0.3});
  std::vector<int32_t> doc;
  int64_t since = 0, longest = 0;
  for (int64_t k = 0; k < 100; ++k) {
    mixture.read(k, doc);
    since = doc[0] == 1 ? 0 : since + 1;
    longest = std::max(longest, since);
  }
  EXPECT_LE(longest, 3);
}

TEST(MixtureDocuments, RandomAccessEqualsSequentialReading) {
  auto mixture = numbered_mixture({5, 11, 2}, {1.5, 1.0, 0.25});
  std::vector<std::vector<int32_t>> sequential(mixture.size());
  for (int64_t k = 0; k < mixture.size(); ++k) mixture.read(k, sequential[k]);
  std::vector<int64_t> order(mixture.size());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(7));
  auto again = numbered_mixture({5, 11, 2}, {1.5, 1.0, 0.25});
  std::vector<int32_t> doc;
  for (int64_t k : order) {
    again.read(k, doc);
    EXPECT_EQ(doc, sequential[k]) << k;
  }
  EXPECT_THROW(again.read(mixture.size(), doc), titan::Error);
}

std::string jsonl(const std::vector<std::string>& docs) {
  std::string out;
  for (const auto& d : docs) out += nlohmann::json({{"text", d}}).dump() + "\n";
  return out;
}

const std::vector<std::string> kA = {"alpha one", "alpha two", "alpha three"};
const std::vector<std::string> kB = {"def beta(x):\n    return x\n", "第二个 beta"};

std::vector<int32_t> encoded(const std::string& text) {
  auto ids = qwen3_tokenizer()->encode(text);
  ids.push_back(eos());
  return ids;
}

TEST(MixtureDocuments, OpensFilesOfAnyFormatAsOneDataset) {
  TempFile a("a.jsonl", jsonl(kA));
  TempFile b("b.txt", kB[0]);
  const std::string list = a.path() + ":2," + b.path() + ":1";
  auto docs = open_token_documents(list, qwen3_tokenizer(), eos());
  EXPECT_EQ(docs->path(), list);
  // 2 : 1, until a.jsonl's 3 documents have all been read: 2 cycles of 3.
  ASSERT_EQ(docs->size(), 6);
  std::vector<int32_t> ids;
  int64_t from_a = 0, from_b = 0;
  for (int64_t k = 0; k < docs->size(); ++k) {
    docs->read(k, ids);
    if (ids == encoded(kA[from_a % kA.size()])) {
      ++from_a;
    } else {
      EXPECT_EQ(ids, encoded(kB[0])) << "document " << k;
      ++from_b;
    }
  }
  EXPECT_EQ(from_a, 4);
  EXPECT_EQ(from_b, 2);
  // Opened again: the same sequence.
  auto again = open_token_documents(list, qwen3_tokenizer(), eos());
  std::vector<int32_t> other;
  for (int64_t k = 0; k < docs->size(); ++k) {
    docs->read(k, ids);
    again->read(k, other);
    EXPECT_EQ(ids, other);
  }
}

TEST(MixtureDocuments, TokenShardsMixWithText) {
  TempFile a("a.jsonl", jsonl(kA));
  TempFile b("b.jsonl", jsonl(kB));
  const std::string prefix = (b.dir() / "shards" / "b").string();
  write_token_shards(*qwen3_tokenizer(), {b.path()}, prefix, eos(), 16);
  auto from_text =
      open_token_documents(a.path() + ":1," + b.path() + ":1", qwen3_tokenizer(), eos());
  auto from_shards =
      open_token_documents(a.path() + ":1," + prefix + ".json:1", qwen3_tokenizer(), eos());
  ASSERT_EQ(from_text->size(), from_shards->size());
  std::vector<int32_t> x, y;
  for (int64_t k = 0; k < from_text->size(); ++k) {
    from_text->read(k, x);
    from_shards->read(k, y);
    EXPECT_EQ(x, y) << k;
  }
}

TEST(MixtureDocuments, SinglePathIsReadAsBefore) {
  TempFile a("a.jsonl", jsonl(kA));
  auto docs = open_token_documents(a.path(), qwen3_tokenizer(), eos());
  EXPECT_EQ(docs->path(), a.path());
  EXPECT_EQ(docs->size(), static_cast<int64_t>(kA.size()));
  EXPECT_EQ(dynamic_cast<MixtureDocuments*>(docs.get()), nullptr);
}

TEST(MixtureDocuments, LoaderResumesInTheMixture) {
  TempFile a("a.jsonl", jsonl(kA));
  TempFile b("b.jsonl", jsonl(kB));
  const std::string list = a.path() + ":0.7," + b.path() + ":0.3";
  DataLoader first(qwen3_tokenizer(), list, 2, 5, eos());
  for (int i = 0; i < 4; ++i) first.next();
  const nlohmann::json saved = nlohmann::json::parse(first.state().dump());
  EXPECT_EQ(saved["dataset_path"], list);
  DataLoader resumed(qwen3_tokenizer(), list, 2, 5, eos());
  resumed.load_state(saved);
  for (int i = 0; i < 6; ++i) {
    const Batch x = first.next(), y = resumed.next();
    EXPECT_TRUE(x.inputs.equal(y.inputs) && x.labels.equal(y.labels)) << i;
  }
}

TEST(MixtureDocuments, MissingEntryIsAnErrorNamingIt) {
  TempFile a("a.jsonl", jsonl(kA));
  std::string message = error_of([&] {
    open_token_documents(a.path() + ":1,/nonexistent/b.jsonl:1", qwen3_tokenizer(), eos());
  });
  EXPECT_NE(message.find("entry 2 (\"/nonexistent/b.jsonl:1\")"), std::string::npos) << message;
  EXPECT_NE(message.find("does not exist"), std::string::npos) << message;
  message = error_of([&] {
    open_token_documents(a.path() + "," + a.dir().string() + "/*.none", qwen3_tokenizer(), eos());
  });
  EXPECT_NE(message.find("entry 2"), std::string::npos) << message;
  EXPECT_NE(message.find("matches no file"), std::string::npos) << message;
  TempFile empty("empty.jsonl", "");
  message = error_of(
      [&] { open_token_documents(a.path() + "," + empty.path(), qwen3_tokenizer(), eos()); });
  EXPECT_NE(message.find("entry 2"), std::string::npos) << message;
  EXPECT_NE(message.find("no documents"), std::string::npos) << message;
}

}  // namespace
}  // namespace titan::data
