// The BPE ids of words already encoded, for one thread at a time. Most words of a corpus repeat
// (identifiers, keywords, common words), so a lookup must cost far less than merging: an
// open-addressing table of 16-byte slots holding a hash and offsets into two arenas (word bytes
// and ids), so that a hit touches one slot and two contiguous runs, and an insert allocates
// nothing but arena growth. No lock: the tokenizer lends each encode call a cache of its own
// (WordCachePool), since a shared, locked cache cost a lock per word and serialized threads.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace titan::data {

class WordCache {
 public:
  // Words longer than this are merged each time (rare, and they would crowd the arena).
  static constexpr size_t kMaxWordBytes = 255;
  // Entries at most; once full, new words are merged each time (a corpus's vocabulary of words
  // is far smaller, and a bound keeps memory in check whatever the input).
  static constexpr size_t kMaxEntries = size_t{1} << 18;

  WordCache();

  // Inline, with fixed-size loads only: it runs once per word, most words are short, and a
  // call to memcpy for the tail cost as much as the rest. Both halves of the result (slot index
  // below, tag above) depend on every byte.
  static uint64_t hash(std::string_view word) {
    constexpr uint64_t kMul = 0x9E3779B97F4A7C15ULL;
    const char* p = word.data();
    const size_t n = word.size();
    uint64_t h = n * kMul;
    const auto load8 = [](const char* q) {
      uint64_t v;
      std::memcpy(&v, q, 8);
      return v;
    };
    const auto load4 = [](const char* q) {
      uint32_t v;
      std::memcpy(&v, q, 4);
      return static_cast<uint64_t>(v);
    };
    if (n >= 8) {
      size_t i = 0;
      for (; i + 8 < n; i += 8) {
        h = (h ^ load8(p + i)) * kMul;
        h ^= h >> 31;
      }
      h = (h ^ load8(p + n - 8)) * kMul;  // the last 8 bytes, overlapping the loop's
    } else if (n >= 4) {
      h = (h ^ (load4(p) | load4(p + n - 4) << 32)) * kMul;
    } else if (n > 0) {
      const auto byte = [&](size_t i) { return static_cast<uint64_t>(static_cast<uint8_t>(p[i])); };
      h = (h ^ (byte(0) | byte(n / 2) << 8 | byte(n - 1) << 16)) * kMul;
    }
    h ^= h >> 32;
    h *= kMul;
    h ^= h >> 29;
    return h;
  }

  // The ids cached for `word` (whose hash() is `h`), or an empty span on a miss.
  std::span<const int32_t> find(std::string_view word, uint64_t h) const;
  // Caches `ids` for a word that find() missed (ignored when the word is too long or the cache
  // is full).
  void insert(std::string_view word, uint64_t h, std::span<const int32_t> ids);

  size_t size() const { return size_; }

 private:
  struct Slot {
    uint32_t hash_high;  // upper half of the hash; 0 marks an empty slot
    uint32_t word_offset;
    uint32_t ids_offset;
    uint8_t word_size;
    uint8_t ids_size;
  };
  void grow();

  std::vector<Slot> slots_;  // a power of two, at most half full
  size_t size_ = 0;
  std::string words_;
  std::vector<int32_t> ids_;
};

// Caches lent to encode calls: a call takes one (or a new one when every cache is out) and gives
// it back when it ends, so a thread's later calls usually find the words its earlier ones
// merged, and threads never share one.
class WordCachePool {
 public:
  class Lease {
   public:
    Lease(WordCachePool& pool, std::unique_ptr<WordCache> cache)
        : pool_(pool), cache_(std::move(cache)) {}
    ~Lease() { pool_.give_back(std::move(cache_)); }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    WordCache& operator*() const { return *cache_; }

   private:
    WordCachePool& pool_;
    std::unique_ptr<WordCache> cache_;
  };

  Lease take();

 private:
  void give_back(std::unique_ptr<WordCache> cache);

  std::mutex mutex_;
  std::vector<std::unique_ptr<WordCache>> idle_;
};

}  // namespace titan::data
