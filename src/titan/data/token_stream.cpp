#include "titan/data/token_stream.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "titan/common/error.h"
#include "titan/data/document_source.h"

namespace titan::data {
namespace {

// The way out when a saved position does not fit the data (another file, another tokenizer).
constexpr const char* kStartOver =
    "; to read this data from its start, resume with --checkpoint.exclude_from_loading "
    "dataloader";

// A draw below `bound` without modulo bias (rejection of the incomplete last stretch).
uint64_t uniform_below(std::mt19937_64& rng, uint64_t bound) {
  const uint64_t limit =
      std::numeric_limits<uint64_t>::max() - std::numeric_limits<uint64_t>::max() % bound;
  uint64_t x;
  do x = rng();
  while (x >= limit);
  return x % bound;
}

}  // namespace

std::vector<int64_t> shuffled_order(int64_t n, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  // Seed and epoch mixed through seed_seq, so neighbouring seeds give unrelated orders.
  std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32),
                    static_cast<uint32_t>(epoch), static_cast<uint32_t>(epoch >> 32)};
  std::mt19937_64 rng(seq);
  for (int64_t i = n - 1; i > 0; --i) {
    std::swap(order[i], order[uniform_below(rng, static_cast<uint64_t>(i) + 1)]);
  }
  return order;
}

TokenStream::TokenStream(std::unique_ptr<TokenDocuments> documents, int64_t rank, int64_t world,
                         std::optional<uint64_t> shuffle_seed,
                         std::shared_ptr<DocumentExchange> exchange, int64_t round_tokens)
    : documents_(std::move(documents)),
      rank_(rank),
      world_(world),
      shuffle_seed_(shuffle_seed),
      round_tokens_(round_tokens) {
  TITAN_CHECK(world_ >= 1 && rank_ >= 0 && rank_ < world_, "data-parallel rank ", rank_,
              " is outside the world of size ", world_);
  TITAN_CHECK(round_tokens_ >= 1, "tokens per round of shared reading must be >= 1");
  if (exchange && exchange->size() > 1) {
    TITAN_CHECK(world_ == 1, "shared reading applies to a stream of the whole dataset");
    exchange_ = std::move(exchange);
  }
  const std::string& path = documents_->path();
  TITAN_CHECK(documents_->size() > 0, "dataset file ", path, " is empty (no documents)");
  TITAN_CHECK(documents_->size() > rank_, "dataset file ", path, " has ", documents_->size(),
              " documents, too few for data-parallel rank ", rank_, " of ", world_);
  // An empty dataset would loop forever on eos tokens alone, and one with nothing to learn
  // (SFT records without an assistant turn) would fail at its first step: find a document of
  // this rank with a label to train (usually the very first one).
  const auto trains_something = [&] {
    return std::find(trainable_.begin() + std::min<size_t>(1, trainable_.size()), trainable_.end(),
                     uint8_t{1}) != trainable_.end();
  };
  int64_t first = rank_;
  for (; first < documents_->size(); first += world_) {
    load_document(0, first);
    if (tokens_.size() > 1 && trains_something()) break;
  }
  if (first >= documents_->size()) {
    const std::string why = documents_->why_nothing_trains();
    TITAN_CHECK(why.empty(), "dataset file ", path, " has nothing to train",
                world_ > 1 ? " for data-parallel rank " + std::to_string(rank_) + " of " +
                                 std::to_string(world_)
                           : std::string(),
                ": ", why);
    fail("dataset file ", path, " is empty (no text in the documents of data-parallel rank ", rank_,
         " of ", world_, ")");
  }
  load_document(0, rank_);
  position_ = {0, rank_, 0};
}

int64_t TokenStream::source_index(int64_t epoch, int64_t document) {
  if (!shuffle_seed_) return document;
  if (order_epoch_ != epoch) {
    order_ = shuffled_order(documents_->size(), *shuffle_seed_, epoch);
    order_epoch_ = epoch;
  }
  return order_[static_cast<size_t>(document)];
}

void TokenStream::load_document(int64_t epoch, int64_t document) {
  if (!exchange_) {
    documents_->read_masked(source_index(epoch, document), tokens_, trainable_);
    ++documents_read_;
    return;
  }
  const auto in_round = [&] {
    return round_epoch_ == epoch && !round_.empty() && round_.front().place <= document &&
           document <= round_.back().place;
  };
  if (!in_round()) read_round(epoch, document);
  ReadDocument& d = round_[static_cast<size_t>(document - round_.front().place)];
  if (d.failure == ReadDocument::Failure::kData) throw DataReadError(d.error);
  if (d.failure == ReadDocument::Failure::kOther) throw Error(d.error);
  tokens_ = d.tokens;
  trainable_ = d.trainable;
}

void TokenStream::read_round(int64_t epoch, int64_t first) {
  const int64_t members = exchange_->size(), me = exchange_->rank();
  // Enough documents of the mean length so far for round_tokens_, a multiple of the members.
  int64_t per_member = 1;
  if (round_documents_seen_ > 0 && round_tokens_seen_ > 0) {
    const double mean = static_cast<double>(round_tokens_seen_) / round_documents_seen_;
    per_member = static_cast<int64_t>(
        std::ceil(static_cast<double>(round_tokens_) / (mean * static_cast<double>(members))));
    per_member = std::clamp<int64_t>(per_member, 1, 4096);
  }
  const int64_t end = std::min(documents_->size(), first + per_member * members);
  std::vector<ReadDocument> mine;
  for (int64_t place = first + me; place < end; place += members) {
    ReadDocument d;
    d.place = place;
    try {
      documents_->read_masked(source_index(epoch, place), d.tokens, d.trainable);
      ++documents_read_;
    } catch (const DataReadError& e) {
      d.failure = ReadDocument::Failure::kData;
      d.error = e.what();
    } catch (const Error& e) {
      d.failure = ReadDocument::Failure::kOther;
      d.error = e.what();
    }
    mine.push_back(std::move(d));
  }
  ReadDocument missing;
  missing.place = -1;
  round_.assign(static_cast<size_t>(end - first), missing);
  for (const std::string& theirs : exchange_->all_gather(encode_round(mine))) {
    for (ReadDocument& d : decode_round(theirs)) {
      TITAN_CHECK(d.place >= first && d.place < end, "shared reading: another rank sent place ",
                  d.place, " for the round [", first, ", ", end, ")");
      round_[static_cast<size_t>(d.place - first)] = std::move(d);
    }
  }
  for (int64_t place = first; place < end; ++place)
    TITAN_CHECK(round_[static_cast<size_t>(place - first)].place == place,
                "shared reading: no rank sent place ", place, " of the round [", first, ", ", end,
                ")");
  for (const ReadDocument& d : round_) {
    ++round_documents_seen_;
    round_tokens_seen_ += static_cast<int64_t>(d.tokens.size());
  }
  round_epoch_ = epoch;
}

void TokenStream::next_document() {
  int64_t next = position_.document + world_;
  int64_t epoch = position_.epoch;
  if (next >= documents_->size()) {
    next = rank_;
    ++epoch;
  }
  load_document(epoch, next);
  position_ = {epoch, next, 0};
}

void TokenStream::read(int64_t n, int64_t* out, uint8_t* starts, uint8_t* trainable) {
  while (n > 0) {
    if (position_.offset == static_cast<int64_t>(tokens_.size())) next_document();
    const int64_t take =
        std::min<int64_t>(n, static_cast<int64_t>(tokens_.size()) - position_.offset);
    std::copy_n(tokens_.begin() + position_.offset, take, out);
    if (starts != nullptr) {
      std::fill_n(starts, take, uint8_t{0});
      if (position_.offset == 0) starts[0] = 1;
      starts += take;
    }
    if (trainable != nullptr) {
      std::copy_n(trainable_.begin() + position_.offset, take, trainable);
      trainable += take;
    }
    out += take;
    n -= take;
    position_.offset += take;
  }
}

void TokenStream::skip(int64_t n) {
  while (n > 0) {
    if (position_.offset == static_cast<int64_t>(tokens_.size())) next_document();
    const int64_t take =
        std::min<int64_t>(n, static_cast<int64_t>(tokens_.size()) - position_.offset);
    n -= take;
    position_.offset += take;
  }
}

void TokenStream::read_pairs(int64_t n, int64_t* inputs, int64_t* labels, uint8_t* starts,
                             uint8_t* trainable) {
  while (n > 0) {
    // The pairs of the current document are those before its last id.
    const int64_t pairs = static_cast<int64_t>(tokens_.size()) - 1;
    if (position_.offset >= pairs) {
      next_document();
      continue;  // a document of one id (an empty text's eos) gives no pair
    }
    const int64_t take = std::min<int64_t>(n, pairs - position_.offset);
    std::copy_n(tokens_.begin() + position_.offset, take, inputs);
    std::copy_n(tokens_.begin() + position_.offset + 1, take, labels);
    if (starts != nullptr) {
      std::fill_n(starts, take, uint8_t{0});
      if (position_.offset == 0) starts[0] = 1;
      starts += take;
    }
    if (trainable != nullptr) {
      std::copy_n(trainable_.begin() + position_.offset + 1, take, trainable);
      trainable += take;
    }
    inputs += take;
    labels += take;
    n -= take;
    position_.offset += take;
  }
}

void TokenStream::skip_pairs(int64_t n) {
  while (n > 0) {
    const int64_t pairs = static_cast<int64_t>(tokens_.size()) - 1;
    if (position_.offset >= pairs) {
      next_document();
      continue;
    }
    const int64_t take = std::min<int64_t>(n, pairs - position_.offset);
    n -= take;
    position_.offset += take;
  }
}

void TokenStream::seek(const StreamPosition& p) {
  const std::string& path = documents_->path();
  TITAN_CHECK(p.epoch >= 0 && p.document >= 0 && p.document < documents_->size() &&
                  p.document % world_ == rank_,
              "dataloader state (document ", p.document, ") does not fit dataset file ", path, " (",
              documents_->size(), " documents) for data-parallel rank ", rank_, " of ", world_,
              kStartOver);
  load_document(p.epoch, p.document);
  TITAN_CHECK(p.offset >= 0 && p.offset <= static_cast<int64_t>(tokens_.size()),
              "dataloader state (offset ", p.offset, " in document ", p.document,
              ") does not fit dataset file ", path, ": the document has ", tokens_.size(),
              " tokens; was the file or the tokenizer changed?", kStartOver);
  position_ = p;
}

}  // namespace titan::data
