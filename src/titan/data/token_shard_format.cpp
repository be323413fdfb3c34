#include "titan/data/token_shard_format.h"

#include <bit>
#include <cstring>

#include "titan/common/error.h"

namespace titan::data {
namespace {

static_assert(std::endian::native == std::endian::little, "token shards are little-endian");

template <class T>
T load(const uint8_t* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

template <class T>
void store(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(T));
}

}  // namespace

std::string token_shard_header(const std::vector<uint64_t>& ends) {
  std::string out(kTokenShardMagic);
  store<uint32_t>(out, kTokenShardVersion);
  store<uint32_t>(out, sizeof(uint32_t));
  store<uint64_t>(out, ends.empty() ? 0 : ends.back());
  store<uint64_t>(out, ends.size());
  for (uint64_t end : ends) store<uint64_t>(out, end);
  return out;
}

TokenShardView::TokenShardView(const std::string& path, const uint8_t* bytes, uint64_t size) {
  if (size < kTokenShardHeaderBytes) {
    fail("token shard ", path, ": truncated: ", size, " bytes, less than the ",
         kTokenShardHeaderBytes, "-byte header");
  }
  if (std::memcmp(bytes, kTokenShardMagic.data(), kTokenShardMagic.size()) != 0) {
    fail("token shard ", path, ": not a token shard (the file does not start with \"",
         kTokenShardMagic, "\"); write shards with titan tokenize");
  }
  const auto version = load<uint32_t>(bytes + 8);
  if (version != kTokenShardVersion) {
    fail("token shard ", path, ": format version ", version, ", but this titan reads version ",
         kTokenShardVersion, "; re-run titan tokenize");
  }
  const auto width = load<uint32_t>(bytes + 12);
  if (width != sizeof(uint32_t)) {
    fail("token shard ", path, ": ", width, " bytes per token id; only 4 (uint32) is supported");
  }
  tokens_ = load<uint64_t>(bytes + 16);
  documents_ = load<uint64_t>(bytes + 24);
  // Sizes from the file are checked against its length before any multiplication can wrap.
  const uint64_t room = size - kTokenShardHeaderBytes;
  if (documents_ > room / 8 || tokens_ > (room - documents_ * 8) / 4 ||
      kTokenShardHeaderBytes + documents_ * 8 + tokens_ * 4 != size) {
    fail("token shard ", path, ": ", size, " bytes, but its header announces ", documents_,
         " documents and ", tokens_, " tokens (truncated or corrupt)");
  }
  if ((documents_ == 0) != (tokens_ == 0)) {
    fail("token shard ", path, ": ", documents_, " documents but ", tokens_, " tokens");
  }
  ends_ = bytes + kTokenShardHeaderBytes;
  ids_ = ends_ + documents_ * 8;
  uint64_t previous = 0;
  for (uint64_t i = 0; i < documents_; ++i) {
    const uint64_t end = end_of(i);
    if (end <= previous) {
      fail("token shard ", path, ": document ", i, " ends at token ", end,
           ", not after the previous document's end ", previous,
           " (every document holds at least its eos)");
    }
    if (end > tokens_) {
      fail("token shard ", path, ": document ", i, " ends at token ", end, ", past the ", tokens_,
           " tokens of the shard");
    }
    previous = end;
  }
  if (documents_ > 0 && previous != tokens_) {
    fail("token shard ", path, ": the last document ends at token ", previous,
         " but the shard has ", tokens_);
  }
}

uint64_t TokenShardView::end_of(uint64_t index) const { return load<uint64_t>(ends_ + index * 8); }

void TokenShardView::append_document(int64_t index, std::vector<int32_t>& out) const {
  TITAN_CHECK(index >= 0 && static_cast<uint64_t>(index) < documents_, "token shard document ",
              index, " is out of range (", documents_, " documents)");
  const uint64_t begin = index == 0 ? 0 : end_of(index - 1);
  const uint64_t end = end_of(index);
  const size_t old = out.size();
  out.resize(old + (end - begin));
  for (uint64_t i = begin; i < end; ++i) {
    out[old + (i - begin)] = static_cast<int32_t>(load<uint32_t>(ids_ + i * 4));
  }
}

}  // namespace titan::data
