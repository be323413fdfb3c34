// The syntax of a dataset path that names a weighted mixture (training.dataset_path,
// validator.dataset_path): entries separated by ',', each `PATH[:WEIGHT]`, e.g.
// "a.jsonl:0.7,b/*.jsonl.zst:0.3". The weight is the text after the last ':' when it reads as
// a number; otherwise the whole entry is the path (weight 1). Spaces around an entry are
// ignored. Each PATH is anything a single dataset path may be (token_documents.h).
#pragma once

#include <string>
#include <vector>

namespace titan::data {

struct DatasetEntry {
  std::string path;
  double weight = 1.0;
  bool weighted = false;  // the entry gave its weight
  std::string text;       // the entry as written, for messages
};

// Splits `list` into its entries. Throws titan::Error naming the entry when one is empty or its
// weight is zero, negative, not finite or missing after the ':'.
std::vector<DatasetEntry> parse_dataset_list(const std::string& list);

// True when `list` is one entry without a weight: read as a single dataset, as it always was.
bool is_single_dataset(const std::vector<DatasetEntry>& entries);

}  // namespace titan::data
