// The loader's options: document masking (positions and document ids of packed rows, labels
// that cross into the next document ignored), per-epoch shuffling (a permutation of the
// documents, disjoint across ranks, resumable) and the prefetch thread (the same batches and
// states as without it, errors delivered with their type).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

#include "../error_of.h"
#include "test_helpers.h"
#include "titan/common/error.h"
#include "titan/data/data_loader.h"

namespace titan::data {
namespace {

using testing::qwen3_tokenizer;
using testing::TempFile;

const std::vector<std::string> kDocs = {"alpha beta",
                                        "def f(x):\n    return x * 2\n",
                                        "γάμμα",
                                        "delta 42",
                                        "epsilon epsilon epsilon",
                                        "z",
                                        "η θ ι",
                                        "the eighth document is a little longer than the rest"};

std::string jsonl(const std::vector<std::string>& docs) {
  std::string out;
  for (const auto& d : docs) out += nlohmann::json({{"text", d}}).dump() + "\n";
  return out;
}

int32_t eos() { return qwen3_tokenizer()->token_to_id("<|endoftext|>"); }

std::vector<int64_t> ids_of(size_t doc) {
  std::vector<int64_t> out;
  for (int32_t id : qwen3_tokenizer()->encode(kDocs[doc])) out.push_back(id);
  out.push_back(eos());
  return out;
}

std::vector<int64_t> row(const at::Tensor& t, int64_t r) {
  const auto c = t[r].contiguous();
  return {c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel()};
}

LoaderOptions options(int64_t B, int64_t S) {
  LoaderOptions o;
  o.local_batch_size = B;
  o.seq_len = S;
  o.eos_id = eos();
  return o;
}

void expect_same_batches(DataLoader& a, DataLoader& b, int steps) {
  for (int i = 0; i < steps; ++i) {
    const Batch x = a.next(), y = b.next();
    ASSERT_TRUE(at::equal(x.inputs, y.inputs)) << "batch " << i;
    ASSERT_TRUE(at::equal(x.labels, y.labels)) << "batch " << i;
    ASSERT_EQ(x.positions.defined(), y.positions.defined());
    if (x.positions.defined()) {
      ASSERT_TRUE(at::equal(x.positions, y.positions)) << "batch " << i;
      ASSERT_TRUE(at::equal(x.document_ids, y.document_ids)) << "batch " << i;
    }
    ASSERT_EQ(a.state(), b.state()) << "batch " << i;
  }
}

TEST(DocumentMasking, PositionsRestartAtDocumentStartsAndCrossingLabelsAreIgnored) {
  TempFile file("docs.jsonl", jsonl(kDocs));
  const int64_t B = 2, S = 11, steps = 5;
  LoaderOptions masked = options(B, S);
  masked.document_masking = true;
  DataLoader loader(qwen3_tokenizer(), file.path(), masked);
  DataLoader plain(qwen3_tokenizer(), file.path(), options(B, S));
  // The stream with, for every token, the document it belongs to (its index in the stream).
  std::vector<int64_t> stream, owner;
  for (size_t n = 0; stream.size() < size_t(steps * B * (S + 1));) {
    for (size_t d = 0; d < kDocs.size(); ++d, ++n) {
      for (int64_t id : ids_of(d)) {
        stream.push_back(id);
        owner.push_back(static_cast<int64_t>(n));
      }
    }
  }
  for (int64_t step = 0; step < steps; ++step) {
    const Batch b = loader.next(), p = plain.next();
    ASSERT_TRUE(b.positions.defined() && b.document_ids.defined());
    EXPECT_FALSE(p.positions.defined());
    EXPECT_TRUE(at::equal(b.inputs, p.inputs));
    for (int64_t r = 0; r < B; ++r) {
      const int64_t start = (step * B + r) * (S + 1);
      const auto inputs = row(b.inputs, r), labels = row(b.labels, r),
                 plain_labels = row(p.labels, r);
      const auto positions = row(b.positions, r), documents = row(b.document_ids, r);
      for (int64_t i = 0; i < S; ++i) {
        const int64_t t = start + i;
        EXPECT_EQ(inputs[i], stream[t]);
        // Position: tokens since the later of the row's start and the document's start.
        int64_t first = t;
        while (first > start && owner[first - 1] == owner[t]) --first;
        EXPECT_EQ(positions[i], t - first) << "row " << r << " token " << i;
        EXPECT_EQ(documents[i], owner[t] - owner[start]) << "row " << r << " token " << i;
        const bool crosses = owner[t + 1] != owner[t];
        EXPECT_EQ(labels[i], crosses ? -100 : stream[t + 1]) << "row " << r << " token " << i;
        EXPECT_EQ(plain_labels[i], stream[t + 1]);
      }
    }
  }
}

// torchtitan 0.3.0's packing: seq_len pairs of each document's ids and their successors.
LoaderOptions shifted(int64_t B, int64_t S) {
  LoaderOptions o = options(B, S);
  o.document_masking = true;
  o.shift_within_documents = true;
  return o;
}

TEST(ShiftWithinDocuments, RowsArePairsOfTheSameDocumentPositionsRestarting) {
  TempFile file("docs.jsonl", jsonl(kDocs));
  const int64_t B = 2, S = 7, steps = 4;
  DataLoader loader(qwen3_tokenizer(), file.path(), shifted(B, S));
  std::vector<int64_t> inputs, labels, positions;
  while (inputs.size() < size_t(steps * B * S)) {
    for (size_t d = 0; d < kDocs.size(); ++d) {
      const std::vector<int64_t> ids = ids_of(d);
      for (size_t i = 0; i + 1 < ids.size(); ++i) {
        inputs.push_back(ids[i]);
        labels.push_back(ids[i + 1]);
        positions.push_back(static_cast<int64_t>(i));
      }
    }
  }
  for (int64_t step = 0; step < steps; ++step) {
    const Batch b = loader.next();
    for (int64_t r = 0; r < B; ++r) {
      const int64_t start = (step * B + r) * S;
      const auto in = row(b.inputs, r), out = row(b.labels, r), pos = row(b.positions, r);
      for (int64_t i = 0; i < S; ++i) {
        EXPECT_EQ(in[i], inputs[start + i]) << "row " << r << " pair " << i;
        EXPECT_EQ(out[i], labels[start + i]) << "row " << r << " pair " << i;
        EXPECT_NE(in[i], eos());  // the eos is a label only
      }
      // A row that starts inside a document numbers it from 0.
      int64_t expected = 0;
      for (int64_t i = 0; i < S; ++i) {
        if (i > 0 && positions[start + i] == 0) expected = 0;
        EXPECT_EQ(pos[i], expected++) << "row " << r << " pair " << i;
      }
    }
  }
}

TEST(ShiftWithinDocuments, RanksKeepTheirRowsOfTheOneProcessStreamAndResume) {
  TempFile file("docs.jsonl", jsonl(kDocs));
  const int64_t B = 2, S = 5, steps = 4;
  DataLoader whole(qwen3_tokenizer(), file.path(), shifted(2 * B, S));
  LoaderOptions first = shifted(B, S), second = shifted(B, S);
  first.row_ranks = second.row_ranks = 2;
  second.row_rank = 1;
  DataLoader rank0(qwen3_tokenizer(), file.path(), first);
  DataLoader rank1(qwen3_tokenizer(), file.path(), second);
  for (int64_t step = 0; step < steps; ++step) {
    const Batch all = whole.next(), a = rank0.next(), b = rank1.next();
    EXPECT_TRUE(at::equal(at::cat({a.inputs, b.inputs}), all.inputs)) << "step " << step;
    EXPECT_TRUE(at::equal(at::cat({a.labels, b.labels}), all.labels)) << "step " << step;
    EXPECT_TRUE(at::equal(at::cat({a.positions, b.positions}), all.positions)) << "step " << step;
  }
  // A resumed loader continues with the same batches; a windows loader refuses the state.
  DataLoader resumed(qwen3_tokenizer(), file.path(), first);
  resumed.load_state(rank0.state());
  expect_same_batches(rank0, resumed, 3);
  LoaderOptions windows = options(B, S);
  windows.row_ranks = 2;
  DataLoader other(qwen3_tokenizer(), file.path(), windows);
  EXPECT_NE(titan::testing::error_of([&] { other.load_state(rank0.state()); })
                .find("saved with training.packing torchtitan but this run packs with megatron "
                      "or hf_flattening"),
            std::string::npos);
}

TEST(DocumentMasking, ALiteralEosInsideATextDoesNotSplitItsDocument) {
  TempFile file("docs.jsonl", jsonl({"before <|endoftext|> after", "next"}));
  LoaderOptions o = options(1, 8);
  o.document_masking = true;
  DataLoader loader(qwen3_tokenizer(), file.path(), o);
  const Batch b = loader.next();
  const auto inputs = row(b.inputs, 0), documents = row(b.document_ids, 0);
  std::vector<int64_t> doc0;
  for (int32_t id : qwen3_tokenizer()->encode("before <|endoftext|> after")) doc0.push_back(id);
  doc0.push_back(eos());
  ASSERT_GE(inputs.size(), doc0.size());
  for (size_t i = 0; i < doc0.size(); ++i) EXPECT_EQ(documents[i], 0) << i;
  if (inputs.size() > doc0.size()) {
    EXPECT_EQ(documents[doc0.size()], 1);
  }
}

TEST(Shuffle, EachEpochIsAPermutationDrawnFromTheSeed) {
  const auto a = shuffled_order(1000, 7, 0), b = shuffled_order(1000, 7, 0);
  EXPECT_EQ(a, b);
  std::vector<int64_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(sorted[i], i);
  EXPECT_NE(a, shuffled_order(1000, 7, 1));  // a new order every epoch
  EXPECT_NE(a, shuffled_order(1000, 8, 0));  // and per seed
  int64_t fixed = 0;
  for (int64_t i = 0; i < 1000; ++i) fixed += a[i] == i;
  EXPECT_LT(fixed, 10);  // about one fixed point expected of a random permutation
}

// The documents a rank's stream gives in epoch 0 of `seed`'s order, as token ids (eos included).
std::vector<std::vector<int64_t>> first_epoch(const std::string& path, uint64_t seed, int64_t rank,
                                              int64_t world) {
  TokenStream stream(open_token_documents(path, qwen3_tokenizer(), eos()), rank, world, seed);
  std::vector<std::vector<int64_t>> docs;
  while (true) {
    int64_t id;
    uint8_t start;
    stream.read(1, &id, &start);
    if (stream.position().epoch > 0) break;
    if (start) docs.emplace_back();
    docs.back().push_back(id);
  }
  return docs;
}

TEST(Shuffle, RanksTakeAlternatePlacesOfTheEpochsOrderDisjointly) {
  TempFile file("docs.jsonl", jsonl(kDocs));
  const auto order = shuffled_order(static_cast<int64_t>(kDocs.size()), 3, 0);
  std::multiset<std::vector<int64_t>> all;
  for (int64_t rank = 0; rank < 2; ++rank) {
    const auto docs = first_epoch(file.path(), 3, rank, 2);
    ASSERT_EQ(docs.size(), kDocs.size() / 2);
    for (size_t i = 0; i < docs.size(); ++i) {
      EXPECT_EQ(docs[i], ids_of(static_cast<size_t>(order[rank + 2 * i]))) << rank << " " << i;
      all.insert(docs[i]);
    }
  }
  std::multiset<std::vector<int64_t>> expected;
  for (size_t d = 0; d < kDocs.size(); ++d) expected.insert(ids_of(d));
  EXPECT_EQ(all, expected);
}

TEST(Shuffle, StreamFollowsTheShuffledOrderAndResumesExactly) {
  TempFile file("docs.jsonl", jsonl(kDocs));
  const int64_t S = 5;
  LoaderOptions o = options(1, S);
  o.shuffle_seed = 11;
  DataLoader loader(qwen3_tokenizer(), file.path(), o);
  // Two epochs of the stream, documents in each epoch's order.
  std::vector<int64_t> stream;
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    for (int64_t d : shuffled_order(static_cast<int64_t>(kDocs.size()), 11, epoch)) {
      const auto ids = ids_of(static_cast<size_t>(d));
      stream.insert(stream.end(), ids.begin(), ids.end());
    }
  }
  nlohmann::json middle;
  std::vector<Batch> after;
  const int64_t steps = static_cast<int64_t>(stream.size()) / (S + 1);
  for (int64_t step = 0; step < steps; ++step) {
    if (step == steps / 2) middle = loader.state();
    const Batch b = loader.next();
    if (step >= steps / 2) after.push_back(b);
    const auto begin = stream.begin() + step * (S + 1);
    ASSERT_EQ(row(b.inputs, 0), std::vector<int64_t>(begin, begin + S)) << "step " << step;
  }
  DataLoader resumed(qwen3_tokenizer(), file.path(), o);
  resumed.load_state(middle);
  for (const Batch& b : after) ASSERT_TRUE(at::equal(resumed.next().inputs, b.inputs));

  DataLoader unshuffled(qwen3_tokenizer(), file.path(), options(1, S));
  const std::string message = titan::testing::error_of([&] { unshuffled.load_state(middle); });
  EXPECT_NE(message.find("shuffled with seed 11"), std::string::npos) << message;
}

TEST(Prefetch, GivesTheBatchesAndStatesOfTheCallersThread) {
  TempFile file("docs.jsonl", jsonl(kDocs));
  for (bool masking : {false, true}) {
    LoaderOptions o = options(2, 6);
    o.document_masking = masking;
    o.shuffle_seed = 5;
    DataLoader inline_loader(qwen3_tokenizer(), file.path(), o);
    o.prefetch = 3;
    DataLoader prefetching(qwen3_tokenizer(), file.path(), o);
    expect_same_batches(inline_loader, prefetching, 7);
    // A resume drops what the thread prepared ahead and continues from the state.
    const nlohmann::json s = inline_loader.state();
    inline_loader.next();
    prefetching.next();
    prefetching.load_state(s);
    inline_loader.load_state(s);
    expect_same_batches(inline_loader, prefetching, 9);
  }
}

TEST(Prefetch, AReadErrorReachesTheCallerAsADataReadError) {
  TempFile file("docs.jsonl", jsonl({"one", "two", "three"}) + "{not json\n");
  LoaderOptions o = options(1, 2);
  o.prefetch = 2;
  DataLoader loader(qwen3_tokenizer(), file.path(), o);
  bool thrown = false;
  for (int i = 0; i < 20 && !thrown; ++i) {
    try {
      loader.next();
    } catch (const DataReadError& e) {
      thrown = true;
      EXPECT_NE(std::string(e.what()).find("docs.jsonl:4"), std::string::npos) << e.what();
    }
  }
  EXPECT_TRUE(thrown);
}

}  // namespace
}  // namespace titan::data
