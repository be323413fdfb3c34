#include "titan/data/token_stream.h"

#include <algorithm>

#include "titan/common/error.h"

namespace titan::data {

TokenStream::TokenStream(std::unique_ptr<TokenDocuments> documents, int64_t rank, int64_t world)
    : documents_(std::move(documents)), rank_(rank), world_(world) {
  TITAN_CHECK(world_ >= 1 && rank_ >= 0 && rank_ < world_, "data-parallel rank ", rank_,
              " is outside the world of size ", world_);
  const std::string& path = documents_->path();
  TITAN_CHECK(documents_->size() > 0, "dataset file ", path, " is empty (no documents)");
  TITAN_CHECK(documents_->size() > rank_, "dataset file ", path, " has ", documents_->size(),
              " documents, too few for data-parallel rank ", rank_, " of ", world_);
  // An empty dataset would loop forever on eos tokens alone: find this rank's first document
  // with more than its eos (usually the very first one).
  int64_t first = rank_;
  for (; first < documents_->size(); first += world_) {
    documents_->read(first, tokens_);
    if (tokens_.size() > 1) break;
  }
  TITAN_CHECK(first < documents_->size(), "dataset file ", path,
              " is empty (no text in the documents of data-parallel rank ", rank_, " of ", world_,
              ")");
  load_document(rank_);
  position_ = {0, rank_, 0};
}

void TokenStream::load_document(int64_t index) { documents_->read(index, tokens_); }

void TokenStream::next_document() {
  int64_t next = position_.document + world_;
  if (next >= documents_->size()) {
    next = rank_;
    ++position_.epoch;
  }
  load_document(next);
  position_.document = next;
  position_.offset = 0;
}

void TokenStream::read(int64_t n, int64_t* out) {
  while (n > 0) {
    if (position_.offset == static_cast<int64_t>(tokens_.size())) next_document();
    const int64_t take =
        std::min<int64_t>(n, static_cast<int64_t>(tokens_.size()) - position_.offset);
    std::copy_n(tokens_.begin() + position_.offset, take, out);
    out += take;
    n -= take;
    position_.offset += take;
  }
}

void TokenStream::seek(const StreamPosition& p) {
  const std::string& path = documents_->path();
  TITAN_CHECK(p.epoch >= 0 && p.document >= 0 && p.document < documents_->size() &&
                  p.document % world_ == rank_,
              "dataloader state (document ", p.document, ") does not fit dataset file ", path, " (",
              documents_->size(), " documents) for data-parallel rank ", rank_, " of ", world_);
  load_document(p.document);
  TITAN_CHECK(p.offset >= 0 && p.offset <= static_cast<int64_t>(tokens_.size()),
              "dataloader state (offset ", p.offset, " in document ", p.document,
              ") does not fit dataset file ", path, ": the document has ", tokens_.size(),
              " tokens; was the file or the tokenizer changed?");
  position_ = p;
}

}  // namespace titan::data
