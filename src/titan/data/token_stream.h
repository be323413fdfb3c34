// The packed token stream of one data-parallel rank, as torchtitan builds it: the rank takes
// documents rank, rank + world, rank + 2*world, ... of the source; each document's ids are
// followed by the eos id; when the documents run out the stream starts over (a new epoch).
// Documents are tokenized lazily, one at a time, so a position is (epoch, document, offset)
// and a resumed run re-tokenizes the document it stopped in.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "titan/data/document_source.h"
#include "titan/data/tokenizer/tokenizer.h"

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
  TokenStream(std::shared_ptr<const Tokenizer> tokenizer, std::unique_ptr<DocumentSource> source,
              int32_t eos_id, int64_t rank, int64_t world);

  // Writes the next n tokens to out.
  void read(int64_t n, int64_t* out);

  StreamPosition position() const { return position_; }
  // Throws titan::Error when `p` does not fit this source and rank.
  void seek(const StreamPosition& p);

  const DocumentSource& source() const { return *source_; }

 private:
  void load_document(int64_t index);  // tokenizes into tokens_
  void next_document();

  std::shared_ptr<const Tokenizer> tokenizer_;
  std::unique_ptr<DocumentSource> source_;
  int32_t eos_id_;
  int64_t rank_, world_;
  StreamPosition position_;
  std::vector<int32_t> tokens_;  // the current document's ids and eos
};

}  // namespace titan::data
