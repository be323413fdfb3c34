// The binary layout of one token shard file (PREFIX-00000.bin, written by `titan tokenize`),
// little-endian, documented in README.md ("Token shards"):
//   bytes 0-7          magic "TITANTOK"
//   bytes 8-11         u32 format version (2)
//   bytes 12-15        u32 bytes per token id (4: uint32)
//   bytes 16-23        u64 token count T
//   bytes 24-31        u64 document count D (>= 1 unless T == 0)
//   bytes 32 ..        u64 ends[D]: ends[i] is the number of tokens in documents 0..i, so that
//                      document i is ids[ends[i-1], ends[i]); ends[D-1] == T
//   then               T token ids; every document ends with the eos id
// The end offsets let a reader reach document i at once (a resumed run seeks there) and keep
// a literal eos inside a document's text from splitting it. Torch-free, so the fuzz target and
// the sanitizer build use it directly.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace titan::data {

inline constexpr std::string_view kTokenShardMagic = "TITANTOK";
inline constexpr uint32_t kTokenShardVersion = 2;
inline constexpr uint64_t kTokenShardHeaderBytes = 32;
// The "format" of PREFIX.json (token_shards.h) for shards of this version.
inline constexpr const char* kTokenShardFormatName = "titan-token-shards-v2";

// The bytes before the ids of a shard holding documents with these `ends` (see above).
std::string token_shard_header(const std::vector<uint64_t>& ends);

// A validated view of one shard's bytes (not owned: they must outlive the view).
class TokenShardView {
 public:
  // Checks the magic, version, id width, that the sizes add up to exactly `size` bytes and
  // that the ends rise to T; throws titan::Error naming `path` and what is wrong.
  TokenShardView(const std::string& path, const uint8_t* bytes, uint64_t size);

  int64_t documents() const { return static_cast<int64_t>(documents_); }
  int64_t tokens() const { return static_cast<int64_t>(tokens_); }
  // Appends document `index`'s ids (its eos included) to `out`.
  void append_document(int64_t index, std::vector<int32_t>& out) const;

 private:
  uint64_t end_of(uint64_t index) const;
  const uint8_t* ends_ = nullptr;  // unaligned-safe reads through memcpy
  const uint8_t* ids_ = nullptr;
  uint64_t documents_ = 0, tokens_ = 0;
};

}  // namespace titan::data
