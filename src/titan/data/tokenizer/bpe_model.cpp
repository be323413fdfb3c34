#include "titan/data/tokenizer/bpe_model.h"

#include <algorithm>
#include <bit>

#include "titan/common/error.h"
#include "titan/data/tokenizer/byte_level.h"

namespace titan::data {

BpeModel BpeModel::from_parts(const nlohmann::json& model,
                              std::vector<std::pair<std::string, int64_t>> vocab,
                              const std::vector<std::pair<std::string, std::string>>& merges,
                              const std::string& file) {
  const std::string type = model.value("type", "");
  if (type != "BPE")
    fail("tokenizer file ", file, ": model type '", type, "' is not supported (only BPE)");
  const auto prefix = model.value("continuing_subword_prefix", nlohmann::json());
  const auto suffix = model.value("end_of_word_suffix", nlohmann::json());
  if ((prefix.is_string() && !prefix.get<std::string>().empty()) ||
      (suffix.is_string() && !suffix.get<std::string>().empty())) {
    fail("tokenizer file ", file,
         ": BPE continuing_subword_prefix / end_of_word_suffix are not supported");
  }
  if (model.contains("dropout") && model["dropout"].is_number() &&
      model["dropout"].get<double>() != 0) {
    fail("tokenizer file ", file, ": BPE dropout is not supported");
  }
  if (vocab.empty()) fail("tokenizer file ", file, ": model.vocab is missing or empty");
  BpeModel m;
  m.ignore_merges_ = model.value("ignore_merges", false);
  m.vocab_slots_.assign(std::bit_ceil(2 * vocab.size() + 2), -1);
  int64_t max_id = -1;
  for (const auto& entry : vocab) max_id = std::max(max_id, entry.second);
  if (max_id >= 0 && max_id <= (1 << 30)) {
    m.id_to_token_.reserve(max_id + 1);
    m.has_id_.reserve(max_id + 1);
  }
  for (auto& [token, id64] : vocab) {
    if (id64 < 0 || id64 > (1 << 30)) {
      fail("tokenizer file ", file, ": model.vocab entry '", token, "' has the invalid id ", id64);
    }
    const auto id = static_cast<int32_t>(id64);
    if (static_cast<size_t>(id) >= m.id_to_token_.size()) {
      m.id_to_token_.resize(id + 1);
      m.has_id_.resize(id + 1, false);
    }
    if (m.has_id_[id]) {
      fail("tokenizer file ", file, ": model.vocab gives the id ", id, " to both '",
           m.id_to_token_[id], "' and '", token, "'");
    }
    m.id_to_token_[id] = std::move(token);
    m.has_id_[id] = true;
    // A token given twice keeps its first id, as the map this replaced did.
    const std::string_view key = m.id_to_token_[id];
    const size_t mask = m.vocab_slots_.size() - 1;
    size_t i = WordCache::hash(key) & mask;
    while (m.vocab_slots_[i] >= 0 && m.id_to_token_[m.vocab_slots_[i]] != key) i = (i + 1) & mask;
    if (m.vocab_slots_[i] < 0) m.vocab_slots_[i] = id;
  }
  for (int b = 0; b < 256; ++b) {
    const auto id = m.token_to_id(byte_to_unicode_string(static_cast<uint8_t>(b)));
    if (!id) fail("tokenizer file ", file, ": model.vocab lacks the byte-level token for byte ", b);
    m.byte_ids_[b] = *id;
  }
  m.merge_slots_.assign(std::bit_ceil(2 * merges.size() + 2), {kNoPair, {}});
  std::string joined;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    joined.assign(a).append(b);
    const auto ia = m.token_to_id(a), ib = m.token_to_id(b), iab = m.token_to_id(joined);
    if (!ia || !ib || !iab) {
      fail("tokenizer file ", file, ": merge '", a, " ", b,
           "' uses a token missing from the vocab");
    }
    // Later duplicates win, as when `tokenizers` collects the merges into a map.
    const uint64_t key = pair_key(*ia, *ib);
    m.merge_slots_[m.merge_slot(key)] = {key, {static_cast<int32_t>(rank), *iab}};
  }
  return m;
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
  if (vocab_slots_.empty()) return std::nullopt;
  const size_t mask = vocab_slots_.size() - 1;
  for (size_t i = WordCache::hash(token) & mask; vocab_slots_[i] >= 0; i = (i + 1) & mask) {
    if (id_to_token_[vocab_slots_[i]] == token) return vocab_slots_[i];
  }
  return std::nullopt;
}

const std::string* BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || id >= id_bound() || !has_id_[id]) return nullptr;
  return &id_to_token_[id];
}

// The slot holding `key`, or the empty slot where it would go.
size_t BpeModel::merge_slot(uint64_t key) const {
  const size_t mask = merge_slots_.size() - 1;
  size_t i = static_cast<size_t>((key * 0x9E3779B97F4A7C15ULL) >> 20) & mask;
  while (merge_slots_[i].key != key && merge_slots_[i].key != kNoPair) i = (i + 1) & mask;
  return i;
}

const BpeModel::MergeInfo* BpeModel::find_merge(int32_t a, int32_t b) const {
  if (merge_slots_.empty()) return nullptr;
  const MergeSlot& slot = merge_slots_[merge_slot(pair_key(a, b))];
  return slot.key == kNoPair ? nullptr : &slot.info;
}

void BpeModel::encode_word(std::string_view word, BpeScratch& s, WordCache& cache,
                           std::vector<int32_t>& out) const {
  if (word.size() == 1) {
    out.push_back(byte_ids_[static_cast<uint8_t>(word[0])]);
    return;
  }
  const uint64_t h = WordCache::hash(word);
  if (const auto hit = cache.find(word, h); !hit.empty()) {
    out.insert(out.end(), hit.begin(), hit.end());
    return;
  }
  const size_t first = out.size();
  merge_all(word, s, out);
  cache.insert(word, h, std::span<const int32_t>(out.data() + first, out.size() - first));
}

void BpeModel::merge_all(std::string_view word, BpeScratch& s, std::vector<int32_t>& out) const {
  if (ignore_merges_) {
    // With ignore_merges, a word that is itself in the vocabulary is taken whole.
    std::string token;
    for (char c : word) token += byte_to_unicode_string(static_cast<uint8_t>(c));
    if (const auto id = token_to_id(token)) {
      out.push_back(*id);
      return;
    }
  }
  const auto n = static_cast<int32_t>(word.size());
  s.symbols.resize(n);
  for (int32_t i = 0; i < n; ++i) {
    s.symbols[i] = {byte_ids_[static_cast<uint8_t>(word[i])], i - 1, i + 1 < n ? i + 1 : -1, false};
  }
  // A min-heap on (rank, pos), as `tokenizers`' BinaryHeap of Merge orders it.
  const auto later = [](const BpeScratch::Merge& x, const BpeScratch::Merge& y) {
    return x.rank != y.rank ? x.rank > y.rank : x.pos > y.pos;
  };
  s.heap.clear();
  for (int32_t i = 0; i + 1 < n; ++i) {
    if (const MergeInfo* m = find_merge(s.symbols[i].id, s.symbols[i + 1].id)) {
      s.heap.push_back({m->rank, i, m->new_id});
    }
  }
  std::make_heap(s.heap.begin(), s.heap.end(), later);
  auto push = [&](const BpeScratch::Merge& m) {
    s.heap.push_back(m);
    std::push_heap(s.heap.begin(), s.heap.end(), later);
  };
  while (!s.heap.empty()) {
    std::pop_heap(s.heap.begin(), s.heap.end(), later);
    const BpeScratch::Merge top = s.heap.back();
    s.heap.pop_back();
    auto& cur = s.symbols[top.pos];
    if (cur.removed || cur.next < 0) continue;
    const int32_t next_pos = cur.next;
    const auto right = s.symbols[next_pos];
    // Skip entries that went stale: the pair must still produce the same token.
    const MergeInfo* still = find_merge(cur.id, right.id);
    if (!still || still->new_id != top.new_id) continue;
    cur.id = top.new_id;
    cur.next = right.next;
    s.symbols[next_pos].removed = true;
    if (right.next >= 0) s.symbols[right.next].prev = top.pos;
    if (cur.prev >= 0) {
      if (const MergeInfo* m = find_merge(s.symbols[cur.prev].id, cur.id)) {
        push({m->rank, cur.prev, m->new_id});
      }
    }
    if (cur.next >= 0) {
      if (const MergeInfo* m = find_merge(cur.id, s.symbols[cur.next].id)) {
        push({m->rank, top.pos, m->new_id});
      }
    }
  }
  for (int32_t i = 0; i >= 0; i = s.symbols[i].next) out.push_back(s.symbols[i].id);
}

}  // namespace titan::data
