// The packed token stream of one data-parallel rank, as torchtitan builds it: the rank takes
// documents rank, rank + world, rank + 2*world, ... of the source; each document's ids are
// followed by the eos id; when the documents run out the stream starts over (a new epoch).
// Documents are read (tokenized, or taken from token shards) lazily, one at a time, so a
// position is (epoch, document, offset) and a resumed run re-reads the document it stopped in.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "titan/data/token_documents.h"

namespace titan::data {

struct StreamPosition {
  int64_t epoch = 0;
  int64_t document = 0;  // index in the source of the document being read
  int64_t offset = 0;    // tokens of it already consumed (its eos included at the end)
};

class TokenStream {
 public:
  // Throws titan::Error naming the file when this rank gets no document or all its documents
  // are empty (no tokens at all).
  TokenStream(std::unique_ptr<TokenDocuments> documents, int64_t rank, int64_t world);

  // Writes the next n tokens to out.
  void read(int64_t n, int64_t* out);

  StreamPosition position() const { return position_; }
  // Throws titan::Error when `p` does not fit this source and rank.
  void seek(const StreamPosition& p);

  const TokenDocuments& documents() const { return *documents_; }

 private:
  void load_document(int64_t index);  // into tokens_
  void next_document();

  std::unique_ptr<TokenDocuments> documents_;
  int64_t rank_, world_;
  StreamPosition position_;
  std::vector<int32_t> tokens_;  // the current document's ids and eos
};

}  // namespace titan::data
