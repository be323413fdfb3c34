// Per-rank batches of preference pairs (training.objective dpo; docs/preference.md): the
// dataset's records visited in file order, or with a shuffle seed in a new order every epoch
// (torch.randperm seeded with seed + epoch, the order TRL's trainer draws through accelerate's
// SeedableRandomSampler, so runs over the same records see the same pairs), skipping the records
// that make no pair (counted, preference_pairs.h). A global batch is the next
// row_ranks x local_batch_size pairs; this rank takes pairs [row_rank x B, (row_rank + 1) x B)
// of it, so a pair is never split between ranks and the pairs of a step are the same whatever
// the layout. An epoch ends when its records run out, inside a batch if need be: the batch goes
// on with the next epoch's first records.
//
// A batch (preference_batch.h) holds 2 x local_batch_size rows, chosen then rejected. With
// prefetch > 0 a background thread prepares batches ahead (prefetcher.h); batches and states
// are the same as without it. state()/load_state() resume exactly.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "titan/data/batch_source.h"
#include "titan/data/preference_batch.h"
#include "titan/data/preference_pairs.h"
#include "titan/data/prefetcher.h"

namespace titan::data {

struct PreferenceLoaderOptions {
  int64_t local_batch_size = 1;  // pairs per rank per micro-batch
  PairLength length;
  std::string eos_token;  // appended to text completions (tokenizer_config.json's eos_token)
  int32_t pad_id = 0;
  int64_t pad_multiple = 1;  // rows padded to a multiple of this length
  std::optional<uint64_t> shuffle_seed;
  // Gives the chat template of conversational records (preference_pairs.h; may be empty).
  PreferencePairs::TemplateLoader chat_template;
  int64_t prefetch = 0;
  int64_t row_rank = 0, row_ranks = 1;  // this rank's share of the global batch (see above)
};

// The records in the order epoch `epoch` visits them (see above).
std::vector<int64_t> preference_order(int64_t records, std::optional<uint64_t> shuffle_seed,
                                      int64_t epoch);

class PreferenceLoader : public BatchSource {
 public:
  // Throws titan::Error naming the dataset when it cannot be opened or has no record.
  PreferenceLoader(std::shared_ptr<const Tokenizer> tokenizer, const std::string& dataset_path,
                   const PreferenceLoaderOptions& options);
  ~PreferenceLoader() override;

  // Throws titan::Error when a whole epoch of records makes no pair (saying why, per kind), and
  // DataReadError when a record cannot be read.
  PairBatch next_pairs();
  // The same batch as the trainer takes it: its rows, with the completion tokens and records.
  Batch next() override;

  // {"epoch", "record", "dataset_path"} (and "shuffle_seed"): where the next global batch
  // starts, the same on every rank.
  nlohmann::json state() const override;
  void load_state(const nlohmann::json& s) override;

  double wait_seconds() const override { return waited_; }
  int64_t documents_read() const override { return pairs_.tally().records; }
  PreferenceTally tally() const { return pairs_.tally(); }
  std::vector<std::string> report() const override { return pairs_.report(); }
  const std::string& path() const { return pairs_.path(); }
  int64_t records() const { return pairs_.size(); }  // in the dataset, pairs or not

 private:
  struct Position {
    int64_t epoch = 0, record = 0;  // the record's place in the epoch's order
  };
  struct Prepared {
    PairBatch batch;
    Position after;
  };
  Prepared prepare();  // the prefetch thread's work
  // The next record that makes a pair, from `at` on (advanced past it).
  std::pair<TokenizedPair, int64_t> next_pair(Position& at);

  PreferencePairs pairs_;
  PreferenceLoaderOptions options_;
  std::string dataset_path_;
  Position read_;  // where prepare() reads next
  Position next_;  // where the batch next() returns next starts
  int64_t order_epoch_ = -1;
  std::vector<int64_t> order_;
  std::unique_ptr<Prefetcher<Prepared>> prefetcher_;
  double waited_ = 0;
};

}  // namespace titan::data
