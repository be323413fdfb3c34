// Per-rank batches for training: the rank's packed token stream (token_stream.h) cut into
// non-overlapping windows of seq_len + 1 tokens, each giving inputs = x[:-1], labels = x[1:]
// (shifted here, torchtitan's convention). Deterministic; state()/load_state() resume a run with
// exactly the batches it would have seen.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "titan/data/token_stream.h"
#include "titan/data/tokenizer/tokenizer.h"

namespace titan::data {

struct Batch {
  at::Tensor inputs, labels;  // int64 [local_batch_size, seq_len]
};

class DataLoader {
 public:
  // Throws titan::Error naming the file when it is missing, or empty (no tokens at all).
  // `text_field`: the field of a jsonl record that holds the document (training.
  // dataset_text_field).
  DataLoader(std::shared_ptr<const Tokenizer> tok, const std::string& dataset_path,
             int64_t local_batch_size, int64_t seq_len, int32_t eos_id, int64_t dp_rank = 0,
             int64_t dp_world = 1, const std::string& text_field = "text");

  Batch next();

  // {"epoch", "document", "offset", "dp_rank", "dp_world", "dataset_path"}: where the next batch
  // starts. load_state() checks the rank layout and that the position fits the dataset.
  nlohmann::json state() const;
  void load_state(const nlohmann::json& s);

 private:
  TokenStream stream_;
  int64_t local_batch_size_, seq_len_, dp_rank_, dp_world_;
  std::string dataset_path_;
};

}  // namespace titan::data
