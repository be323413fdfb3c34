// The documents of a dataset as token ids, each followed by the eos id: what the token stream
// (token_stream.h) packs. Two kinds:
//   text documents (document_source.h: jsonl, compressed jsonl, text, folders, globs),
//           tokenized when read;
//   token shards written by `titan tokenize` (token_shard_format.h), memory-mapped and read
//           without a tokenizer: training.dataset_path names PREFIX.json, one shard
//           (PREFIX-00000.bin) or a glob of shards ("data/corpus-*.bin").
// A list of such paths with weights ("a.jsonl:0.7,shards/b.json:0.3", dataset_list.h) is read
// as their weighted mixture (mixture_documents.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "titan/data/chat_template.h"
#include "titan/data/document_source.h"
#include "titan/data/tokenizer/tokenizer.h"

namespace titan::data {

class TokenDocuments {
 public:
  virtual ~TokenDocuments() = default;
  virtual int64_t size() const = 0;
  // Replaces `out` with document `index`'s ids and its eos; throws DataReadError. Not
  // thread-safe.
  virtual void read(int64_t index, std::vector<int32_t>& out) = 0;
  // The same, and `trainable` with one flag per id: 0 for ids the loss must not learn to
  // predict (an SFT conversation's prompt). Every id is trainable unless a kind says otherwise.
  virtual void read_masked(int64_t index, std::vector<int32_t>& out,
                           std::vector<uint8_t>& trainable);
  // The dataset, for messages.
  virtual const std::string& path() const = 0;
  // What the documents read so far hold that trains nothing (SFT records of roles the template
  // does not render, without an assistant turn, ...; chat_documents.h): one line per kind,
  // none when all is well. Thread-safe.
  virtual std::vector<std::string> report() const { return {}; }
  // When no document of the dataset has a token to learn: why, or "" when the kind cannot say.
  virtual std::string why_nothing_trains() const { return ""; }
};

// Opens `path` as token shards when it names them (see above), otherwise as text documents
// tokenized by `tokenizer`; with `chat_template` (SFT), as chat conversations (chat_documents.h).
// Shards must use `eos_id` and ids below the tokenizer's vocabulary. A dataset list opens each
// entry so and mixes them; an error names the entry.
std::unique_ptr<TokenDocuments> open_token_documents(
    const std::string& path, std::shared_ptr<const Tokenizer> tokenizer, int32_t eos_id,
    const std::string& text_field = "text",
    std::shared_ptr<const ChatTemplate> chat_template = nullptr);

// True when `path` names token shards rather than text.
bool names_token_shards(const std::string& path);

}  // namespace titan::data
