// Token shards: a corpus tokenized once, for `titan tokenize`:
//   PREFIX-00000.bin, PREFIX-00001.bin, ...  the ids, in the binary format of
//                                            token_shard_format.h; a document never spans two
//                                            shards (a shard closes after the document that
//                                            reaches max_shard_tokens)
//   PREFIX.json                               {"format": "titan-token-shards-v2", "dtype":
//                                            "uint32", "eos_id", "tokenizer", "inputs",
//                                            "documents", "tokens", "shards": [{"file",
//                                            "documents", "tokens"}]}
// File names in "shards" are relative to the folder of PREFIX.json. Every file is written under a
// temporary name and renamed when complete, the metadata last. Training reads them back through
// training.dataset_path = PREFIX.json (token_documents.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "titan/data/tokenizer/tokenizer.h"

namespace titan::data {

// Tokenizes every document of `inputs` (jsonl, compressed jsonl or text files, folders or globs,
// as DocumentSource reads them; `text_field` names the jsonl field) and returns the metadata it
// wrote to PREFIX.json. `threads` tokenize at once; the output is the same for any number.
nlohmann::json write_token_shards(const Tokenizer& tokenizer,
                                  const std::vector<std::string>& inputs, const std::string& prefix,
                                  int32_t eos_id, int64_t max_shard_tokens,
                                  const std::string& text_field = "text", int64_t threads = 1);

}  // namespace titan::data
