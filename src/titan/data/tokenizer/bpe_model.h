// The "model" section of tokenizer.json for byte-level BPE: the vocabulary and the ranked merges.
// Words arrive as raw bytes; each byte starts as the id of its byte-level character, and pairs are
// merged lowest rank first (leftmost on ties) with the same priority queue as `tokenizers`, so the
// result is identical even where two merges produce the same token.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "titan/data/tokenizer/word_cache.h"

namespace titan::data {

// Per-call working memory for BpeModel::encode_word, reused across words by one thread.
struct BpeScratch {
  struct Symbol {
    int32_t id;
    int32_t prev, next;  // neighbours in the linked list, -1 at the ends
    bool removed;
  };
  struct Merge {
    int32_t rank, pos, new_id;
  };
  std::vector<Symbol> symbols;
  std::vector<Merge> heap;
};

class BpeModel {
 public:
  // `model` is the tokenizer.json model section (its type and flags); vocab and merges come
  // separately, as read_tokenizer_json() streams them. Errors name `file`.
  static BpeModel from_parts(const nlohmann::json& model,
                             std::vector<std::pair<std::string, int64_t>> vocab,
                             const std::vector<std::pair<std::string, std::string>>& merges,
                             const std::string& file);

  // Appends the ids of one pre-tokenized word (raw bytes), looked up in or added to `cache`.
  void encode_word(std::string_view word, BpeScratch& scratch, WordCache& cache,
                   std::vector<int32_t>& out) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  // The token string of `id` in the byte-level alphabet, or nullptr when the vocab has no such id.
  const std::string* id_to_token(int32_t id) const;
  // One past the largest id in the vocabulary.
  int32_t id_bound() const { return static_cast<int32_t>(id_to_token_.size()); }

 private:
  struct MergeInfo {
    int32_t rank, new_id;
  };
  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  const MergeInfo* find_merge(int32_t a, int32_t b) const;
  void merge_all(std::string_view word, BpeScratch& s, std::vector<int32_t>& out) const;

  // Token -> id as open addressing over ids (-1: empty), the keys being id_to_token_'s strings:
  // no node or key copy per entry, which made building the map a large part of start-up.
  std::vector<int32_t> vocab_slots_;
  std::vector<std::string> id_to_token_;
  std::vector<bool> has_id_;
  std::array<int32_t, 256> byte_ids_{};
  // (left id, right id) -> merge, as open addressing (kNoPair: empty) probed from a
  // multiplicative hash of the key: a lookup is one or two adjacent 16-byte slots.
  struct MergeSlot {
    uint64_t key;
    MergeInfo info;
  };
  static constexpr uint64_t kNoPair = ~uint64_t{0};  // ids are below 2^30, so no pair has it
  size_t merge_slot(uint64_t key) const;
  std::vector<MergeSlot> merge_slots_;
  bool ignore_merges_ = false;
};

}  // namespace titan::data
