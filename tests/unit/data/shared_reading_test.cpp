// Shared reading (token_stream.h, data_loader.h): ranks that split the tokenization between
// them still see exactly the batches of one rank reading alone, each keeps its own rows, and a
// document that fails to read fails on every rank, with its type, where its stream reaches it.
// The "ranks" are threads here, exchanging through a shared rendezvous.
#include <gtest/gtest.h>

#include <barrier>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "test_helpers.h"
#include "titan/common/error.h"
#include "titan/data/data_loader.h"
#include "titan/data/document_round.h"
#include "titan/data/document_source.h"

namespace titan::data {
namespace {

using testing::qwen3_tokenizer;
using testing::TempFile;

// An all-gather among `members` threads: each deposits its bytes, waits for the others, reads
// everyone's, and waits again before the slots are reused.
class ThreadRendezvous {
 public:
  explicit ThreadRendezvous(int64_t members)
      : slots_(static_cast<size_t>(members)), sync_(members) {}
  std::vector<std::string> all_gather(int64_t rank, const std::string& mine) {
    slots_[static_cast<size_t>(rank)] = mine;
    sync_.arrive_and_wait();
    std::vector<std::string> out = slots_;
    sync_.arrive_and_wait();
    ++calls_;
    return out;
  }
  int64_t calls() const { return calls_; }

 private:
  std::vector<std::string> slots_;
  std::barrier<> sync_;
  std::atomic<int64_t> calls_{0};
};

class ThreadExchange : public DocumentExchange {
 public:
  ThreadExchange(ThreadRendezvous& rendezvous, int64_t rank, int64_t size)
      : rendezvous_(rendezvous), rank_(rank), size_(size) {}
  int64_t rank() const override { return rank_; }
  int64_t size() const override { return size_; }
  std::vector<std::string> all_gather(const std::string& mine) override {
    return rendezvous_.all_gather(rank_, mine);
  }

 private:
  ThreadRendezvous& rendezvous_;
  int64_t rank_, size_;
};

std::string corpus(int64_t documents) {
  std::string out;
  for (int64_t i = 0; i < documents; ++i)
    out += nlohmann::json({{"text", "document " + std::to_string(i) + std::string(i % 7, 'x')}})
               .dump() +
           "\n";
  return out;
}

int32_t eos() { return qwen3_tokenizer()->token_to_id("<|endoftext|>"); }

LoaderOptions options(int64_t batch, int64_t seq_len) {
  LoaderOptions o;
  o.local_batch_size = batch;
  o.seq_len = seq_len;
  o.eos_id = eos();
  return o;
}

// Every rank's batches of `steps` passes, each rank on its own thread.
std::vector<std::vector<Batch>> run_ranks(const std::string& path, int64_t ranks, LoaderOptions o,
                                          int64_t steps, std::vector<int64_t>* read = nullptr) {
  ThreadRendezvous rendezvous(ranks);
  std::vector<std::vector<Batch>> out(static_cast<size_t>(ranks));
  if (read) read->assign(static_cast<size_t>(ranks), 0);
  std::vector<std::thread> threads;
  for (int64_t r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      LoaderOptions mine = o;
      mine.row_rank = r;
      mine.row_ranks = ranks;
      mine.exchange = std::make_shared<ThreadExchange>(rendezvous, r, ranks);
      DataLoader loader(qwen3_tokenizer(), path, mine);
      for (int64_t s = 0; s < steps; ++s) out[static_cast<size_t>(r)].push_back(loader.next());
      if (read) (*read)[static_cast<size_t>(r)] = loader.documents_read();
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

TEST(SharedReading, RanksSplitTheReadingAndSeeTheBatchesOfOneRank) {
  TempFile file("docs.jsonl", corpus(40));
  const int64_t B = 2, S = 9, steps = 12;  // wraps around the corpus
  // One rank reading alone, with every rank's rows in its batch.
  DataLoader alone(qwen3_tokenizer(), file.path(), options(4 * B, S));
  std::vector<Batch> expected;
  for (int64_t s = 0; s < steps; ++s) expected.push_back(alone.next());
  for (int64_t prefetch : {0, 2}) {
    LoaderOptions o = options(B, S);
    o.prefetch = prefetch;
    std::vector<int64_t> read;
    const auto batches = run_ranks(file.path(), 4, o, steps, &read);
    for (int64_t r = 0; r < 4; ++r) {
      for (int64_t s = 0; s < steps; ++s) {
        const Batch& got = batches[static_cast<size_t>(r)][static_cast<size_t>(s)];
        EXPECT_TRUE(at::equal(got.inputs, expected[s].inputs.narrow(0, r * B, B)))
            << "rank " << r << " step " << s << " prefetch " << prefetch;
        EXPECT_TRUE(at::equal(got.labels, expected[s].labels.narrow(0, r * B, B)));
      }
      // About a quarter of the documents each (a round reads about one pass ahead, and
      // prefetching a few passes more).
      EXPECT_GT(read[static_cast<size_t>(r)], 0);
      EXPECT_LE(read[static_cast<size_t>(r)] * 4, alone.documents_read() + 40 * (prefetch + 1))
          << "rank " << r << " read " << read[static_cast<size_t>(r)] << " of "
          << alone.documents_read();
    }
  }
}

TEST(SharedReading, APositionSavedUnderOneLayoutResumesUnderAnother) {
  TempFile file("docs.jsonl", corpus(25));
  const int64_t B = 1, S = 6;
  DataLoader alone(qwen3_tokenizer(), file.path(), options(2 * B, S));
  for (int i = 0; i < 3; ++i) alone.next();
  const nlohmann::json saved = alone.state();
  const Batch next_alone = alone.next();
  // Two ranks resume from the single rank's position and read the rows it reads next.
  ThreadRendezvous rendezvous(2);
  std::vector<Batch> got(2);
  std::vector<std::thread> threads;
  for (int64_t r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      LoaderOptions o = options(B, S);
      o.row_rank = r;
      o.row_ranks = 2;
      o.exchange = std::make_shared<ThreadExchange>(rendezvous, r, 2);
      DataLoader loader(qwen3_tokenizer(), file.path(), o);
      loader.load_state(saved);
      got[static_cast<size_t>(r)] = loader.next();
    });
  }
  for (auto& t : threads) t.join();
  for (int64_t r = 0; r < 2; ++r)
    EXPECT_TRUE(at::equal(got[static_cast<size_t>(r)].inputs, next_alone.inputs.narrow(0, r, 1)));
}

TEST(SharedReading, ABrokenRecordFailsOnEveryRankWithItsType) {
  std::string text = corpus(6) + "{\"text\": 5}\n" + corpus(3);
  TempFile file("docs.jsonl", text);
  std::vector<std::string> errors(2);
  ThreadRendezvous rendezvous(2);
  std::vector<std::thread> threads;
  for (int64_t r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      LoaderOptions o = options(1, 8);
      o.row_rank = r;
      o.row_ranks = 2;
      o.exchange = std::make_shared<ThreadExchange>(rendezvous, r, 2);
      try {
        DataLoader loader(qwen3_tokenizer(), file.path(), o);
        for (int i = 0; i < 50; ++i) loader.next();
      } catch (const DataReadError& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_FALSE(errors[0].empty());
  EXPECT_EQ(errors[0], errors[1]);
  EXPECT_NE(errors[0].find(":7"), std::string::npos) << errors[0];  // names the line
}

TEST(DocumentRound, RoundTripsAndRefusesForeignBytes) {
  ReadDocument ok;
  ok.place = 4;
  ok.tokens = {1, 2, 3};
  ok.trainable = {1, 0, 1};
  ReadDocument failed;
  failed.place = 6;
  failed.failure = ReadDocument::Failure::kData;
  failed.error = "docs.jsonl:7: no text";
  const std::vector<ReadDocument> back = decode_round(encode_round({ok, failed}));
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].tokens, ok.tokens);
  EXPECT_EQ(back[0].trainable, ok.trainable);
  EXPECT_EQ(back[1].place, 6);
  EXPECT_EQ(back[1].error, failed.error);
  const std::string bytes = encode_round({ok});
  EXPECT_THROW(decode_round(bytes.substr(0, bytes.size() - 1)), Error);
  EXPECT_THROW(decode_round("garbage!"), Error);
}

}  // namespace
}  // namespace titan::data
