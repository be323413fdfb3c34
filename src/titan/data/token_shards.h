// Token shards: a corpus tokenized once, for `titan tokenize`. Format (little-endian):
//   PREFIX-00000.bin, PREFIX-00001.bin, ...  raw uint32 token ids; every document's ids are
//                                            followed by the eos id; a document never spans two
//                                            shards (a shard closes after the document that
//                                            reaches max_shard_tokens)
//   PREFIX.json                               {"format": "titan-token-shards-v1", "dtype":
//   "uint32",
//                                            "eos_id", "tokenizer", "inputs", "documents",
//                                            "tokens", "shards": [{"file", "documents", "tokens"}]}
// File names in "shards" are relative to the folder of PREFIX.json. Every file is written under a
// temporary name and renamed when complete, the metadata last.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "titan/data/tokenizer/tokenizer.h"

namespace titan::data {

// Tokenizes every document of `inputs` (jsonl, compressed jsonl or text files, folders or globs,
// as DocumentSource reads them; `text_field` names the jsonl field) and returns the metadata it
// wrote to PREFIX.json.
nlohmann::json write_token_shards(const Tokenizer& tokenizer,
                                  const std::vector<std::string>& inputs, const std::string& prefix,
                                  int32_t eos_id, int64_t max_shard_tokens,
                                  const std::string& text_field = "text");

}  // namespace titan::data
