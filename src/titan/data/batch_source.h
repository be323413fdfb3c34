// What the trainer reads a step's rows from: a local batch and the reader's resumable position.
// The language-model loader (data_loader.h) and the preference loader (preference_loader.h)
// are its two kinds; the trainer and its checkpoint know only this.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace titan::data {

struct Batch {
  at::Tensor inputs, labels;  // int64 [local_batch_size, seq_len]
  // int64 [local_batch_size, seq_len] with document masking; undefined otherwise.
  at::Tensor positions, document_ids;
  // A context-parallel rank's part of the rows (train/context_parallel_batch.h) also carries
  // its tokens' positions, below this (the rows' length); 0 for whole rows.
  int64_t positions_end = 0;
  // Preference pairs (preference_batch.h), rows [chosen; rejected]: each row's completion
  // tokens (int64 [2P]) and each pair's record index (int64 [P]); undefined otherwise.
  at::Tensor completion_tokens, pair_records;
};

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  virtual Batch next() = 0;
  // Where the next batch starts (saved in checkpoints), and a resume from it.
  virtual nlohmann::json state() const = 0;
  virtual void load_state(const nlohmann::json& s) = 0;
  // torchtitan 0.3.0's data position taken as this source's (data_loader.h says when it can
  // be). Returns "" when taken, else why not. Sources that never read torchtitan's text
  // dataset (DPO's preference pairs) keep their own start.
  virtual std::string load_torchtitan_position(int64_t /*world_size*/, int64_t /*sample_idx*/,
                                               int64_t /*epoch*/,
                                               const std::vector<int64_t>& /*inputs_buffer*/,
                                               const std::vector<int64_t>& /*labels_buffer*/) {
    return "this run reads preference pairs, not torchtitan's text dataset";
  }
  // Seconds the caller waited in next() so far.
  virtual double wait_seconds() const = 0;
  // Documents (or records) this rank read so far.
  virtual int64_t documents_read() const = 0;
  // What the data held that trains nothing, one line per kind (for the end of the run).
  virtual std::vector<std::string> report() const = 0;
};

}  // namespace titan::data
