#include "titan/data/tokenizer/word_cache.h"

#include <cstring>

namespace titan::data {
WordCache::WordCache() : slots_(1024) {}

std::span<const int32_t> WordCache::find(std::string_view word, uint64_t h) const {
  const uint32_t tag = static_cast<uint32_t>(h >> 32) | 1;
  const size_t mask = slots_.size() - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    const Slot& s = slots_[i];
    if (s.hash_high == 0) return {};
    if (s.hash_high == tag && s.word_size == word.size() &&
        std::memcmp(words_.data() + s.word_offset, word.data(), word.size()) == 0) {
      return {ids_.data() + s.ids_offset, s.ids_size};
    }
  }
}

void WordCache::insert(std::string_view word, uint64_t h, std::span<const int32_t> ids) {
  if (word.size() > kMaxWordBytes || ids.size() > 255 || ids.empty() || size_ >= kMaxEntries) {
    return;
  }
  if (2 * (size_ + 1) > slots_.size()) grow();
  const uint32_t tag = static_cast<uint32_t>(h >> 32) | 1;
  const size_t mask = slots_.size() - 1;
  size_t i = h & mask;
  while (slots_[i].hash_high != 0) i = (i + 1) & mask;
  slots_[i] = {tag, static_cast<uint32_t>(words_.size()), static_cast<uint32_t>(ids_.size()),
               static_cast<uint8_t>(word.size()), static_cast<uint8_t>(ids.size())};
  words_.append(word);
  ids_.insert(ids_.end(), ids.begin(), ids.end());
  ++size_;
}

// Doubles the table; the arenas stay, so only slots move (placed again by their stored tag and
// the low bits of their word's hash, recomputed).
void WordCache::grow() {
  std::vector<Slot> old(slots_.size() * 2);
  old.swap(slots_);
  const size_t mask = slots_.size() - 1;
  for (const Slot& s : old) {
    if (s.hash_high == 0) continue;
    const uint64_t h = hash(std::string_view(words_.data() + s.word_offset, s.word_size));
    size_t i = h & mask;
    while (slots_[i].hash_high != 0) i = (i + 1) & mask;
    slots_[i] = s;
  }
}

WordCachePool::Lease WordCachePool::take() {
  std::unique_ptr<WordCache> cache;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!idle_.empty()) {
      cache = std::move(idle_.back());
      idle_.pop_back();
    }
  }
  if (!cache) cache = std::make_unique<WordCache>();
  return Lease(*this, std::move(cache));
}

void WordCachePool::give_back(std::unique_ptr<WordCache> cache) {
  if (!cache) return;
  std::lock_guard<std::mutex> lock(mutex_);
  idle_.push_back(std::move(cache));
}

}  // namespace titan::data
