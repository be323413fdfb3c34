// The packed token stream of one data-parallel rank, as torchtitan builds it: the rank takes
// documents rank, rank + world, rank + 2*world, ... of the epoch's document order; each
// document's ids are followed by the eos id; when the documents run out the stream starts over
// (a new epoch). The order is the source's own, or with `shuffle_seed` a permutation drawn anew
// for every epoch from (seed, epoch), the same on every rank and every platform.
// Documents are read (tokenized, or taken from token shards) lazily, so a position is (epoch,
// document, offset) and a resumed run re-reads the document it stopped in.
//
// Shared reading: ranks that all pack the same stream (the data-parallel ranks of training,
// each keeping its own rows, data_loader.h) can split the reading instead of each tokenizing
// every document. Given a DocumentExchange, the stream reads documents in rounds of consecutive
// places of the epoch's order: member m tokenizes the places m, m + members, ... of the round,
// and one all-gather gives every member all of them. A round holds about `round_tokens` tokens
// (what the readers consume between two exchanges; the first round, before any length is
// known, one document per member), so there are few exchanges and little read ahead. Every member's
// stream is then the same, as if it had read alone, at 1/members of the tokenization work. All
// members must make the same reads in the same order (they do: they read the same stream).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "titan/data/document_exchange.h"
#include "titan/data/document_round.h"
#include "titan/data/token_documents.h"

namespace titan::data {

struct StreamPosition {
  int64_t epoch = 0;
  int64_t document = 0;  // place in the epoch's order (the source index when not shuffled)
  int64_t offset = 0;    // tokens of it already consumed (its eos included at the end)
};

// The order in which epoch `epoch` visits `n` documents under `seed`: a Fisher-Yates shuffle
// driven by std::mt19937_64 (whose output the standard fixes), so it is reproducible anywhere.
std::vector<int64_t> shuffled_order(int64_t n, uint64_t seed, int64_t epoch);

class TokenStream {
 public:
  // Throws titan::Error naming the file when this rank gets no document or all its documents
  // are empty (no tokens at all).
  // `exchange` (may be null: this rank reads every document itself) shares the reading; it
  // applies to a stream of the whole dataset (rank 0 of world 1) only.
  TokenStream(std::unique_ptr<TokenDocuments> documents, int64_t rank, int64_t world,
              std::optional<uint64_t> shuffle_seed = std::nullopt,
              std::shared_ptr<DocumentExchange> exchange = nullptr, int64_t round_tokens = 4096);

  // Writes the next n tokens to out; with `starts` set, starts[i] = 1 where out[i] is the first
  // token of a document and 0 elsewhere; with `trainable` set, the documents' flags of which
  // tokens are targets (TokenDocuments::read_masked).
  void read(int64_t n, int64_t* out, uint8_t* starts = nullptr, uint8_t* trainable = nullptr);

  // torchtitan 0.3.0's packing: the next n (input, label) pairs, each a token and the next one of
  // the same document. A document of k ids (its eos last) gives k - 1 pairs, so no label crosses
  // into the next document and the eos is never an input. starts[i] = 1 where pair i is its
  // document's first; trainable[i] is the flag of labels[i]. A read that ends inside a document
  // leaves the position there (its offset counts the pairs taken); one that ends a document
  // leaves the offset at its last id.
  void read_pairs(int64_t n, int64_t* inputs, int64_t* labels, uint8_t* starts = nullptr,
                  uint8_t* trainable = nullptr);
  // Advances by n pairs as read_pairs() would, without copying them.
  void skip_pairs(int64_t n);

  StreamPosition position() const { return position_; }
  // The ids (its eos included) of the document at the position.
  int64_t document_tokens() const { return static_cast<int64_t>(tokens_.size()); }
  // Throws titan::Error when `p` does not fit this source and rank.
  void seek(const StreamPosition& p);

  // Advances by n tokens as read() would, without copying them.
  void skip(int64_t n);

  const TokenDocuments& documents() const { return *documents_; }
  // Documents this rank read itself (tokenized, or took from token shards) so far.
  int64_t documents_read() const { return documents_read_; }

 private:
  int64_t source_index(int64_t epoch, int64_t document);  // the order's entry
  void load_document(int64_t epoch, int64_t document);    // into tokens_
  void next_document();
  // Reads the round of places starting at `first` of `epoch` together with the other members.
  void read_round(int64_t epoch, int64_t first);

  std::unique_ptr<TokenDocuments> documents_;
  int64_t rank_, world_;
  std::optional<uint64_t> shuffle_seed_;
  int64_t order_epoch_ = -1;    // the epoch order_ belongs to
  std::vector<int64_t> order_;  // the shuffled order of that epoch
  StreamPosition position_;
  std::vector<int32_t> tokens_;                 // the current document's ids and eos
  std::vector<uint8_t> trainable_;              // and their flags
  std::shared_ptr<DocumentExchange> exchange_;  // null, or of one member: reads alone
  int64_t round_tokens_ = 4096;
  int64_t round_documents_seen_ = 0, round_tokens_seen_ = 0;  // for the mean document length
  int64_t round_epoch_ = -1;                                  // the epoch of round_
  std::vector<ReadDocument> round_;                           // the current round, by place
  int64_t documents_read_ = 0;
};

}  // namespace titan::data
