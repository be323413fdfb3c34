#include "titan/data/token_shards.h"

#include <bit>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "titan/common/error.h"
#include "titan/data/document_source.h"

namespace titan::data {
namespace {

namespace fs = std::filesystem;

// Writes `bytes` to `path` through `path.tmp` and a rename, so no half-written file is left.
void write_file_atomically(const std::string& path, const char* data, size_t size) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) fail("cannot write ", tmp);
    out.write(data, static_cast<std::streamsize>(size));
    if (!out) fail("cannot write ", tmp, " (disk full?)");
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) fail("cannot rename ", tmp, " to ", path, ": ", ec.message());
}

std::string shard_name(const std::string& prefix, size_t index) {
  char suffix[32];
  std::snprintf(suffix, sizeof(suffix), "-%05zu.bin", index);
  return prefix + suffix;
}

}  // namespace

nlohmann::json write_token_shards(const Tokenizer& tokenizer,
                                  const std::vector<std::string>& inputs, const std::string& prefix,
                                  int32_t eos_id, int64_t max_shard_tokens,
                                  const std::string& text_field) {
  TITAN_CHECK(!inputs.empty(), "tokenize: no input files given");
  TITAN_CHECK(max_shard_tokens >= 1, "tokenize: the shard size must be >= 1 token");
  static_assert(std::endian::native == std::endian::little, "shards are written little-endian");
  const fs::path parent = fs::path(prefix).parent_path();
  if (!parent.empty()) fs::create_directories(parent);

  // Open every input first, so a missing file fails before anything is written.
  std::vector<std::unique_ptr<DocumentSource>> sources;
  for (const auto& path : inputs) sources.push_back(DocumentSource::open(path, text_field));

  nlohmann::json shards = nlohmann::json::array();
  std::vector<uint32_t> buffer;
  std::vector<int32_t> ids;
  int64_t shard_documents = 0, total_documents = 0, total_tokens = 0;
  const auto flush = [&] {
    const std::string file = shard_name(prefix, shards.size());
    write_file_atomically(file, reinterpret_cast<const char*>(buffer.data()),
                          buffer.size() * sizeof(uint32_t));
    shards.push_back({{"file", fs::path(file).filename().string()},
                      {"documents", shard_documents},
                      {"tokens", static_cast<int64_t>(buffer.size())}});
    buffer.clear();
    shard_documents = 0;
  };
  for (auto& source : sources) {
    for (int64_t i = 0; i < source->size(); ++i) {
      ids.clear();
      tokenizer.encode_into(source->text(i), ids);
      ids.push_back(eos_id);
      buffer.insert(buffer.end(), ids.begin(), ids.end());
      ++shard_documents;
      ++total_documents;
      total_tokens += static_cast<int64_t>(ids.size());
      if (static_cast<int64_t>(buffer.size()) >= max_shard_tokens) flush();
    }
  }
  if (!buffer.empty() || shards.empty()) flush();

  nlohmann::json meta = {{"format", "titan-token-shards-v1"},
                         {"dtype", "uint32"},
                         {"eos_id", eos_id},
                         {"tokenizer", tokenizer.path()},
                         {"inputs", inputs},
                         {"documents", total_documents},
                         {"tokens", total_tokens},
                         {"shards", shards}};
  const std::string text = meta.dump(2) + "\n";
  write_file_atomically(prefix + ".json", text.data(), text.size());
  return meta;
}

}  // namespace titan::data
