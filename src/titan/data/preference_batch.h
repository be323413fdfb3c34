// A batch of preference pairs as the trainer takes it (TRL's DataCollatorForPreference, in
// titan's shifted layout): 2P rows, the P chosen sequences first and then the P rejected ones,
// each prompt + completion cut to max_length (keep_start: its first tokens; keep_end: its
// last), given as inputs = ids[:-1] and labels = ids[1:] like every titan batch, the labels
// -100 outside the completion, right-padded with `pad_id` (labels -100) to the longest row
// rounded up to a multiple of `pad_multiple`. Right padding leaves a causal model's outputs on
// the real tokens unchanged, so a row's summed label log-probabilities are its sequence's
// completion log-probability, TRL's logps.
#pragma once

#include <cstdint>
#include <vector>

#include "titan/data/data_loader.h"
#include "titan/data/preference_pairs.h"

namespace titan::data {

struct PairBatch {
  Batch rows;  // inputs and labels [2P, T]
  // Per row, its completion's tokens after the cut, the first one included (int64 [2P]; TRL's
  // completion_mask.sum(1), which IPO divides by).
  at::Tensor completion_tokens;
  at::Tensor records;  // per pair, the index of its record in the dataset (int64 [P])
};

// `records[i]` is pair i's record index.
PairBatch collate_pairs(const std::vector<TokenizedPair>& pairs,
                        const std::vector<int64_t>& records, const PairLength& length,
                        int32_t pad_id, int64_t pad_multiple = 1);

}  // namespace titan::data
