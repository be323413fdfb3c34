#include "titan/data/preference_loader.h"

#include <ATen/CPUGeneratorImpl.h>

#include <chrono>

#include "titan/common/error.h"
#include "titan/data/mixture_source.h"

namespace titan::data {

std::vector<int64_t> preference_order(int64_t records, std::optional<uint64_t> shuffle_seed,
                                      int64_t epoch) {
  std::vector<int64_t> order(static_cast<size_t>(records));
  if (!shuffle_seed) {
    for (int64_t i = 0; i < records; ++i) order[static_cast<size_t>(i)] = i;
    return order;
  }
  at::Generator generator = at::detail::createCPUGenerator(*shuffle_seed + epoch);
  const at::Tensor permutation = at::randperm(records, generator, at::kLong);
  std::copy_n(permutation.data_ptr<int64_t>(), records, order.begin());
  return order;
}

PreferenceLoader::PreferenceLoader(std::shared_ptr<const Tokenizer> tokenizer,
                                   const std::string& dataset_path,
                                   const PreferenceLoaderOptions& options)
    : pairs_(open_record_source(dataset_path), std::move(tokenizer), options.chat_template,
             options.eos_token, options.length),
      options_(options),
      dataset_path_(dataset_path) {
  TITAN_CHECK(options.local_batch_size >= 1, "training.local_batch_size must be >= 1, got ",
              options.local_batch_size);
  TITAN_CHECK(
      options.row_ranks >= 1 && options.row_rank >= 0 && options.row_rank < options.row_ranks,
      "preference loader: row rank ", options.row_rank, " of ", options.row_ranks);
  TITAN_CHECK(pairs_.size() > 0, "dataset ", dataset_path, " has no records");
}

// The prefetch thread uses the members: it must stop before they go.
PreferenceLoader::~PreferenceLoader() { prefetcher_.reset(); }

std::pair<TokenizedPair, int64_t> PreferenceLoader::next_pair(Position& at) {
  // A whole epoch's worth of records without a pair means none makes one.
  for (int64_t seen = 0; seen < pairs_.size(); ++seen) {
    if (at.record >= pairs_.size()) {
      ++at.epoch;
      at.record = 0;
    }
    if (order_epoch_ != at.epoch) {
      order_ = preference_order(pairs_.size(), options_.shuffle_seed, at.epoch);
      order_epoch_ = at.epoch;
    }
    const int64_t record = order_[static_cast<size_t>(at.record++)];
    if (std::optional<TokenizedPair> pair = pairs_.read(record)) return {std::move(*pair), record};
  }
  fail("dataset ", dataset_path_, ": ", pairs_.tally().why_no_pair());
}

PreferenceLoader::Prepared PreferenceLoader::prepare() {
  const int64_t B = options_.local_batch_size;
  std::vector<TokenizedPair> mine;
  std::vector<int64_t> records;
  // Every rank reads the whole global batch: which records make pairs decides where each
  // rank's share begins.
  for (int64_t rank = 0; rank < options_.row_ranks; ++rank) {
    for (int64_t i = 0; i < B; ++i) {
      auto [pair, record] = next_pair(read_);
      if (rank != options_.row_rank) continue;
      mine.push_back(std::move(pair));
      records.push_back(record);
    }
  }
  Prepared out;
  out.batch = collate_pairs(mine, records, options_.length, options_.pad_id, options_.pad_multiple);
  out.after = read_;
  return out;
}

PairBatch PreferenceLoader::next_pairs() {
  const auto start = std::chrono::steady_clock::now();
  Prepared p;
  if (options_.prefetch == 0) {
    p = prepare();
  } else {
    if (!prefetcher_)
      prefetcher_ = std::make_unique<Prefetcher<Prepared>>([this] { return prepare(); },
                                                           static_cast<size_t>(options_.prefetch));
    p = prefetcher_->next();
  }
  next_ = p.after;
  waited_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return std::move(p.batch);
}

Batch PreferenceLoader::next() {
  PairBatch pairs = next_pairs();
  Batch rows = std::move(pairs.rows);
  rows.completion_tokens = std::move(pairs.completion_tokens);
  rows.pair_records = std::move(pairs.records);
  return rows;
}

nlohmann::json PreferenceLoader::state() const {
  nlohmann::json s = {
      {"epoch", next_.epoch}, {"record", next_.record}, {"dataset_path", dataset_path_}};
  if (options_.shuffle_seed) s["shuffle_seed"] = *options_.shuffle_seed;
  return s;
}

void PreferenceLoader::load_state(const nlohmann::json& s) {
  const auto get = [&](const char* key) -> int64_t {
    TITAN_CHECK(s.is_object() && s.contains(key) && s[key].is_number_integer(),
                "dataloader state lacks the integer field '", key,
                "' (was it saved by a run of another training.objective?)");
    return s[key].get<int64_t>();
  };
  const bool saved_shuffled = s.is_object() && s.contains("shuffle_seed");
  const uint64_t saved_seed = saved_shuffled ? s["shuffle_seed"].get<uint64_t>() : 0;
  TITAN_CHECK(saved_shuffled == options_.shuffle_seed.has_value() &&
                  saved_seed == options_.shuffle_seed.value_or(0),
              "dataloader state was saved ",
              saved_shuffled ? "shuffled with seed " + std::to_string(saved_seed) : "not shuffled",
              " but this run is ",
              options_.shuffle_seed ? "shuffled with seed " + std::to_string(*options_.shuffle_seed)
                                    : "not shuffled",
              "; resume with the same training.shuffle and training.seed");
  const Position at{get("epoch"), get("record")};
  TITAN_CHECK(at.epoch >= 0 && at.record >= 0 && at.record <= pairs_.size(), "dataloader state ",
              "record ", at.record, " of epoch ", at.epoch, " is outside dataset ", dataset_path_,
              " (", pairs_.size(),
              " records); resume reading the same dataset, or with "
              "--checkpoint.exclude_from_loading dataloader to read it from its start");
  prefetcher_.reset();  // its batches belong to the old position
  read_ = next_ = at;
}

}  // namespace titan::data
