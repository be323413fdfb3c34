#include "titan/data/token_shards.h"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <thread>

#include "titan/common/error.h"
#include "titan/common/file_util.h"
#include "titan/data/document_source.h"
#include "titan/data/token_shard_format.h"

namespace titan::data {
namespace {

namespace fs = std::filesystem;

std::string shard_name(const std::string& prefix, size_t index) {
  char suffix[32];
  std::snprintf(suffix, sizeof(suffix), "-%05zu.bin", index);
  return prefix + suffix;
}

}  // namespace

nlohmann::json write_token_shards(const Tokenizer& tokenizer,
                                  const std::vector<std::string>& inputs, const std::string& prefix,
                                  int32_t eos_id, int64_t max_shard_tokens,
                                  const std::string& text_field, int64_t threads) {
  TITAN_CHECK(!inputs.empty(), "tokenize: no input files given");
  TITAN_CHECK(max_shard_tokens >= 1, "tokenize: the shard size must be >= 1 token");
  const fs::path parent = fs::path(prefix).parent_path();
  if (!parent.empty()) fs::create_directories(parent);

  // Open every input first, so a missing file fails before anything is written.
  std::vector<std::unique_ptr<DocumentSource>> sources;
  for (const auto& path : inputs) sources.push_back(DocumentSource::open(path, text_field));

  nlohmann::json shards = nlohmann::json::array();
  std::vector<uint32_t> buffer;
  std::vector<uint64_t> ends;  // of the shard's documents (token_shard_format.h)
  int64_t total_documents = 0, total_tokens = 0;
  const auto flush = [&] {
    const std::string file = shard_name(prefix, shards.size());
    AtomicFile out(file);
    out.write(token_shard_header(ends));
    out.write(buffer.data(), buffer.size() * sizeof(uint32_t));
    out.commit();
    shards.push_back({{"file", fs::path(file).filename().string()},
                      {"documents", static_cast<int64_t>(ends.size())},
                      {"tokens", static_cast<int64_t>(buffer.size())}});
    buffer.clear();
    ends.clear();
  };
  // Documents are read in order on this thread, in groups, and each group is tokenized by
  // `threads` workers (document j of a group by worker j % threads); the ids are then appended
  // in document order, so the output does not depend on the thread count.
  const int64_t workers = std::max<int64_t>(1, threads);
  const size_t group_size = static_cast<size_t>(256 * workers);
  std::vector<std::string> texts;
  std::vector<std::vector<int32_t>> encoded;
  const auto tokenize_group = [&] {
    encoded.assign(texts.size(), {});
    const auto work = [&](size_t first) {
      for (size_t j = first; j < texts.size(); j += static_cast<size_t>(workers)) {
        tokenizer.encode_into(texts[j], encoded[j]);
        encoded[j].push_back(eos_id);
      }
    };
    std::vector<std::exception_ptr> errors(static_cast<size_t>(workers));
    std::vector<std::thread> pool;
    for (size_t w = 1; w < static_cast<size_t>(workers); ++w) {
      pool.emplace_back([&, w] {
        try {
          work(w);
        } catch (...) {
          errors[w] = std::current_exception();
        }
      });
    }
    try {
      work(0);
    } catch (...) {
      errors[0] = std::current_exception();
    }
    for (auto& t : pool) t.join();
    for (const auto& e : errors)
      if (e) std::rethrow_exception(e);
    for (const auto& ids : encoded) {
      buffer.insert(buffer.end(), ids.begin(), ids.end());
      ends.push_back(buffer.size());
      ++total_documents;
      total_tokens += static_cast<int64_t>(ids.size());
      if (static_cast<int64_t>(buffer.size()) >= max_shard_tokens) flush();
    }
    texts.clear();
  };
  for (auto& source : sources) {
    for (int64_t i = 0; i < source->size(); ++i) {
      texts.push_back(source->text(i));
      if (texts.size() == group_size) tokenize_group();
    }
  }
  if (!texts.empty()) tokenize_group();
  if (!buffer.empty() || shards.empty()) flush();

  nlohmann::json meta = {
      {"format", kTokenShardFormatName}, {"dtype", "uint32"}, {"eos_id", eos_id},
      {"tokenizer", tokenizer.path()},   {"inputs", inputs},  {"documents", total_documents},
      {"tokens", total_tokens},          {"shards", shards}};
  write_file_atomic(prefix + ".json", meta.dump(2) + "\n");
  return meta;
}

}  // namespace titan::data
