#include "titan/data/tokenizer/tokenizer_cache.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "titan/common/error.h"
#include "titan/common/file_util.h"
#include "titan/data/tokenizer/word_cache.h"

namespace titan::data {
namespace {

constexpr char kMagic[8] = {'T', 'I', 'T', 'K', 'C', 'A', 'C', 'H'};
constexpr uint32_t kVersion = 1;

// The key and the checksum use a fast 64-bit hash, not a cryptographic one: the cache guards
// against staleness and damage, not against an attacker (whoever can write the cache can write
// tokenizer.json beside it), and hashing the 11 MB file must stay a small part of start-up.
// Hashing the contents rather than trusting size and mtime also catches a file replaced by one
// of the same size within the mtime granularity, or copied with its old mtime.
uint64_t hash_bytes(std::string_view bytes) {
  // WordCache::hash is made for short words; fold long inputs in 4 KiB blocks through it. (A
  // change to that hash makes existing caches fail their checksum, so they are rebuilt.)
  uint64_t h = bytes.size();
  for (size_t i = 0; i < bytes.size(); i += 4096) {
    h = h * 0x9E3779B97F4A7C15ULL ^ WordCache::hash(bytes.substr(i, 4096));
  }
  return h;
}

class Writer {
 public:
  void u32(uint32_t v) { out_.append(reinterpret_cast<const char*>(&v), 4); }
  void u64(uint64_t v) { out_.append(reinterpret_cast<const char*>(&v), 8); }
  void bytes(std::string_view s) {
    u32(static_cast<uint32_t>(s.size()));
    out_.append(s);
  }
  std::string& out() { return out_; }

 private:
  std::string out_;
};

// Reads fields in order; any read past the end sets failed() instead of reading.
class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  bool failed() const { return failed_; }
  bool at_end() const { return pos_ == in_.size(); }
  uint32_t u32() { return fixed<uint32_t>(); }
  uint64_t u64() { return fixed<uint64_t>(); }
  std::string_view bytes() {
    const uint32_t n = u32();
    if (failed_ || n > in_.size() - pos_) {
      failed_ = true;
      return {};
    }
    const std::string_view s = in_.substr(pos_, n);
    pos_ += n;
    return s;
  }

 private:
  template <class T>
  T fixed() {
    T v{};
    if (failed_ || sizeof(T) > in_.size() - pos_) {
      failed_ = true;
      return v;
    }
    std::memcpy(&v, in_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string_view in_;
  size_t pos_ = 0;
  bool failed_ = false;
};

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return std::move(buffer).str();
}

// The second place a cache may live: $XDG_CACHE_HOME/titan or ~/.cache/titan, named by a hash of
// the tokenizer file's absolute path.
std::optional<std::string> user_cache_path(const std::string& json_file) {
  namespace fs = std::filesystem;
  fs::path base;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) {
    base = xdg;
  } else if (const char* home = std::getenv("HOME"); home && *home) {
    base = fs::path(home) / ".cache";
  } else {
    return std::nullopt;
  }
  std::error_code ec;
  const std::string absolute = fs::absolute(json_file, ec).string();
  char name[64];
  std::snprintf(name, sizeof(name), "tokenizer-%016llx.titan-cache-v1.bin",
                static_cast<unsigned long long>(hash_bytes(absolute)));
  return (base / "titan" / name).string();
}

bool try_write(const std::string& path, std::string_view bytes) {
  try {
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
    write_file_atomic(path, bytes);
    return true;
  } catch (const Error&) {
    return false;  // a read-only folder: the caller tries elsewhere or goes without
  }
}

}  // namespace

std::string tokenizer_cache_path(const std::string& json_file) {
  const std::filesystem::path p(json_file);
  // Appended piece by piece: GCC 12 warns falsely (-Wstringop-overflow) on the chained +.
  std::string name = ".";
  name.append(p.filename().string()).append(".titan-cache-v1.bin");
  return (p.parent_path() / name).string();
}

std::string encode_tokenizer_cache(const TokenizerJson& parsed, std::string_view source) {
  Writer w;
  w.out().append(kMagic, sizeof(kMagic));
  w.u32(kVersion);
  w.u64(source.size());
  w.u64(hash_bytes(source));
  w.u32((parsed.has_vocab ? 1u : 0u) | (parsed.has_merges ? 2u : 0u));
  w.bytes(parsed.rest.dump());
  w.u64(parsed.vocab.size());
  for (const auto& [token, id] : parsed.vocab) {
    w.bytes(token);
    w.u64(static_cast<uint64_t>(id));
  }
  w.u64(parsed.merges.size());
  for (const auto& [a, b] : parsed.merges) {
    w.bytes(a);
    w.bytes(b);
  }
  w.u64(hash_bytes(w.out()));  // checksum of everything before it
  return std::move(w.out());
}

bool decode_tokenizer_cache(std::string_view cache, std::string_view source, TokenizerJson& out) {
  if (cache.size() < sizeof(kMagic) + 8 || std::memcmp(cache.data(), kMagic, sizeof(kMagic)) != 0) {
    return false;
  }
  const std::string_view body = cache.substr(0, cache.size() - 8);
  uint64_t checksum;
  std::memcpy(&checksum, cache.data() + body.size(), 8);
  if (checksum != hash_bytes(body)) return false;
  Reader r(body.substr(sizeof(kMagic)));
  if (r.u32() != kVersion || r.u64() != source.size() || r.u64() != hash_bytes(source)) {
    return false;
  }
  const uint32_t flags = r.u32();
  out.has_vocab = flags & 1;
  out.has_merges = flags & 2;
  const std::string_view rest = r.bytes();
  if (r.failed()) return false;
  out.rest = nlohmann::json::parse(rest, nullptr, /*allow_exceptions=*/false);
  if (out.rest.is_discarded()) return false;
  // Each entry takes at least 4 bytes, so a count beyond the bytes left is damage, not a reason
  // to reserve gigabytes.
  const uint64_t vocab_size = r.u64();
  if (r.failed() || vocab_size > body.size() / 4) return false;
  out.vocab.clear();
  out.vocab.reserve(vocab_size);
  for (uint64_t i = 0; i < vocab_size && !r.failed(); ++i) {
    const std::string_view token = r.bytes();
    const auto id = static_cast<int64_t>(r.u64());
    out.vocab.emplace_back(std::string(token), id);
  }
  const uint64_t merges_size = r.u64();
  if (r.failed() || merges_size > body.size() / 8) return false;
  out.merges.clear();
  out.merges.reserve(merges_size);
  for (uint64_t i = 0; i < merges_size && !r.failed(); ++i) {
    const std::string_view a = r.bytes();
    const std::string_view b = r.bytes();
    out.merges.emplace_back(std::string(a), std::string(b));
  }
  return !r.failed() && r.at_end();
}

TokenizerJson read_tokenizer_json_cached(const std::string& json_file) {
  const std::optional<std::string> source = read_file(json_file);
  if (!source) return read_tokenizer_json(json_file);  // it names the file in its error
  const std::string beside = tokenizer_cache_path(json_file);
  const std::optional<std::string> elsewhere = user_cache_path(json_file);
  TokenizerJson parsed;
  for (const std::optional<std::string>& path : {std::optional<std::string>(beside), elsewhere}) {
    if (!path) continue;
    if (const auto cache = read_file(*path);
        cache && decode_tokenizer_cache(*cache, *source, parsed)) {
      return parsed;
    }
  }
  parsed = parse_tokenizer_json(*source, json_file);  // the very bytes the key describes
  const std::string bytes = encode_tokenizer_cache(parsed, *source);
  if (!try_write(beside, bytes) && elsewhere) try_write(*elsewhere, bytes);
  return parsed;
}

}  // namespace titan::data
