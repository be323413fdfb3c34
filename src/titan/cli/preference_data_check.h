// titan check-data for training.objective dpo: the preference records of a dataset read as
// training reads them (preference_pairs.h), or the first pairs printed as TRL tokenizes them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "titan/data/preference_loader.h"
#include "titan/data/tokenizer/tokenizer.h"

namespace titan::cli {

// Reads every record of `path`: prints its records, pairs and tokens, and warns per kind about
// the records that make no pair and the pairs that are cut. Returns the number of records that
// cannot be read (the first's message in `first_error`); throws when no record makes a pair.
int64_t check_preference_dataset(const std::string& key, const std::string& path,
                                 const std::shared_ptr<const data::Tokenizer>& tokenizer,
                                 const data::PreferenceLoaderOptions& options,
                                 std::string& first_error);

// Prints the first `pairs` pairs in the order training visits them, one JSON object per line
// with TRL's columns: {"record": "file:line", "prompt_ids": [...], "chosen_ids": [...],
// "rejected_ids": [...]} (before any cut to dpo.max_length).
void print_preference_pairs(const std::shared_ptr<const data::Tokenizer>& tokenizer,
                            const std::string& path, const data::PreferenceLoaderOptions& options,
                            int64_t pairs);

}  // namespace titan::cli
