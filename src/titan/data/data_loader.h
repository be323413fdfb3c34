// Per-rank batches for training: the rank's packed token stream (token_stream.h) cut into
// non-overlapping windows of seq_len + 1 tokens, each giving inputs = x[:-1], labels = x[1:]
// (shifted here, torchtitan's convention). Deterministic; state()/load_state() resume a run with
// exactly the batches it would have seen.
//
// With document masking (training.document_masking) a batch also says where its documents lie:
// positions restart at 0 where a document starts (and at the start of every row, as torchtitan
// does) and each token carries the index of its document in the row, for block-causal
// attention; the label that would predict the next document's first token from the previous
// document is ignored (-100), as Hugging Face's DataCollatorWithFlattening does, so a packed
// row's loss is the sum of its documents' losses.
//
// With shift_within_documents (training.packing torchtitan, torchtitan 0.3.0's packing) a row is
// seq_len (input, label) pairs of the same document each (token_stream.h, read_pairs): no label
// crosses into the next document, the eos is never an input, no pair is lost at a row's end,
// and attention is block-causal with positions restarting at each document (and at the row's
// start), exactly the rows of torchtitan's HuggingFaceTextDataset.
//
// For SFT, the labels of tokens that are not targets (prompts, see chat_documents.h) are
// ignored (-100) too.
//
// Rows of a global batch (training under data parallelism): with row_ranks > 1 every rank packs
// the same stream, the whole global batch's worth of it, and keeps only its rows: next() returns
// local batch row_rank of each run of row_ranks local batches, so the rows of a step are the
// same whatever the layout. Given an exchange (document_exchange.h) the ranks split the reading
// itself: each tokenizes about 1/row_ranks of the documents (token_stream.h, shared reading).
//
// With prefetch > 0 a background thread reads, tokenizes and packs up to that many batches
// ahead (prefetcher.h); the batches and the states are the same as without it.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "titan/data/batch_source.h"
#include "titan/data/prefetcher.h"
#include "titan/data/token_stream.h"
#include "titan/data/tokenizer/tokenizer.h"

namespace titan::data {

struct LoaderOptions {
  int64_t local_batch_size = 1;
  int64_t seq_len = 1;
  int32_t eos_id = 0;
  // The field of a jsonl/parquet record that holds the document (training.dataset_text_field).
  std::string text_field = "text";
  bool document_masking = false;
  // torchtitan 0.3.0's packing (see above); needs document_masking.
  bool shift_within_documents = false;
  // Documents in a new random order every epoch, drawn from this seed (training.shuffle).
  std::optional<uint64_t> shuffle_seed;
  // SFT (training.sft): records are conversations rendered with this template, and only the
  // assistant turns are targets (chat_documents.h).
  std::shared_ptr<const ChatTemplate> chat_template;
  // Batches a background thread prepares ahead (0: none, batches made on the caller's thread).
  int64_t prefetch = 0;
  // Which rows of the global batch this rank takes (see above), and the ranks it shares the
  // reading with (null: it reads every document itself).
  int64_t row_rank = 0, row_ranks = 1;
  std::shared_ptr<DocumentExchange> exchange;
};

class DataLoader : public BatchSource {
 public:
  // Throws titan::Error naming the file when it is missing, or empty (no tokens at all).
  DataLoader(std::shared_ptr<const Tokenizer> tok, const std::string& dataset_path,
             const LoaderOptions& options);
  DataLoader(std::shared_ptr<const Tokenizer> tok, const std::string& dataset_path,
             int64_t local_batch_size, int64_t seq_len, int32_t eos_id,
             const std::string& text_field = "text");
  ~DataLoader() override;

  Batch next() override;

  // {"epoch", "document", "offset", "dataset_path"} (and "shuffle_seed" when shuffling,
  // "packing": "torchtitan" when shifting within documents): where the next batch starts, the
  // same on every rank (rows are split by row_rank, which a resume under another layout may
  // change). load_state() checks the shuffling, the packing and that the position fits the
  // dataset.
  nlohmann::json state() const override;
  void load_state(const nlohmann::json& s) override;
  // torchtitan 0.3.0's data position (its HuggingFaceTextDataset's state: `sample_idx`
  // documents read in `epoch`, and the (input, label) pairs still buffered, which are the last
  // pairs of those documents) as this loader's, when both read with one data rank
  // (`world_size`: torchtitan's), this one packs as torchtitan does (shifting within
  // documents), unshuffled, and the dataset gives those very tokens there. Returns "" when the
  // position is taken, else why not (the position is then left as it was).
  std::string load_torchtitan_position(int64_t world_size, int64_t sample_idx, int64_t epoch,
                                       const std::vector<int64_t>& inputs_buffer,
                                       const std::vector<int64_t>& labels_buffer) override;

  // Seconds spent in next() so far: the time the caller waited for data (with prefetching,
  // only what the thread had not prepared in time).
  double wait_seconds() const override { return waited_; }
  // Documents this rank read (tokenized, or took from token shards) so far, prefetched ones
  // included.
  int64_t documents_read() const override;
  // What those documents hold that trains nothing (TokenDocuments::report): one line per kind.
  std::vector<std::string> report() const override { return stream_.documents().report(); }

 private:
  struct Prepared {
    Batch batch;
    StreamPosition after;  // the stream's position once this batch is read
  };
  Prepared prepare();  // reads one batch from the stream (the prefetch thread's work)

  TokenStream stream_;
  LoaderOptions options_;
  std::string dataset_path_;
  StreamPosition next_;                               // where the batch next() returns next starts
  std::unique_ptr<Prefetcher<Prepared>> prefetcher_;  // started by the first next()
  double waited_ = 0;
  mutable std::mutex read_count_mutex_;  // documents_read_ is written by the prefetch thread
  int64_t documents_read_ = 0;
};

}  // namespace titan::data
