#include "titan/data/token_documents.h"

#include <algorithm>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "titan/common/error.h"
#include "titan/common/file_util.h"
#include "titan/data/chat_documents.h"
#include "titan/data/dataset_list.h"
#include "titan/data/mixture_documents.h"
#include "titan/data/token_shard_format.h"

namespace titan::data {

void TokenDocuments::read_masked(int64_t index, std::vector<int32_t>& out,
                                 std::vector<uint8_t>& trainable) {
  read(index, out);
  trainable.assign(out.size(), 1);
}

namespace {

class TokenizedDocuments : public TokenDocuments {
 public:
  TokenizedDocuments(std::unique_ptr<DocumentSource> source,
                     std::shared_ptr<const Tokenizer> tokenizer, int32_t eos_id)
      : source_(std::move(source)), tokenizer_(std::move(tokenizer)), eos_id_(eos_id) {}
  int64_t size() const override { return source_->size(); }
  void read(int64_t index, std::vector<int32_t>& out) override {
    out.clear();
    tokenizer_->encode_into(source_->text(index), out);
    out.push_back(eos_id_);
  }
  const std::string& path() const override { return source_->path(); }

 private:
  std::unique_ptr<DocumentSource> source_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  int32_t eos_id_;
};

struct MappedShard {
  std::shared_ptr<const MappedFile> file;
  TokenShardView view;
};

// Shards read one after another as one set of documents.
class ShardDocuments : public TokenDocuments {
 public:
  ShardDocuments(std::string description, const std::vector<std::string>& files, int32_t eos_id,
                 int64_t vocab_size)
      : description_(std::move(description)), eos_id_(eos_id), vocab_size_(vocab_size) {
    starts_.push_back(0);
    for (const std::string& file : files) {
      if (!std::filesystem::exists(file)) fail("token shard ", file, " not found");
      auto mapped = MappedFile::open(file);
      TokenShardView view(file, mapped->data(), mapped->size());
      starts_.push_back(starts_.back() + view.documents());
      shards_.push_back({std::move(mapped), view});
    }
  }
  int64_t size() const override { return starts_.back(); }
  void read(int64_t index, std::vector<int32_t>& out) override {
    const auto it = std::upper_bound(starts_.begin(), starts_.end() - 1, index);
    const size_t shard = static_cast<size_t>(it - starts_.begin()) - 1;
    const int64_t local = index - starts_[shard];
    out.clear();
    shards_[shard].view.append_document(local, out);
    const std::string& file = shards_[shard].file->path();
    if (out.empty() || out.back() != eos_id_) {
      fail_read("token shard ", file, ": document ", local, " does not end with the eos id ",
                eos_id_, "; was it written with another tokenizer or --eos-token?");
    }
    for (int32_t id : out) {
      if (id < 0 || id >= vocab_size_) {
        fail_read("token shard ", file, ": document ", local, " holds token id ",
                  static_cast<uint32_t>(id), ", outside the tokenizer's ", vocab_size_,
                  " ids; was it written with another tokenizer?");
      }
    }
  }
  const std::string& path() const override { return description_; }

 private:
  std::string description_;
  int32_t eos_id_;
  int64_t vocab_size_;
  std::vector<MappedShard> shards_;
  std::vector<int64_t> starts_;  // starts_[i]: index of shard i's first document; back(): total
};

// PREFIX.json -> the shard files it lists (relative to its folder), after checking the format
// and that it was written with the same eos id.
std::vector<std::string> shards_of_metadata(const std::string& path, int32_t eos_id) {
  if (!std::filesystem::exists(path)) fail("token shard metadata ", path, " not found");
  nlohmann::json meta;
  try {
    meta = nlohmann::json::parse(read_text_file(path));
  } catch (const nlohmann::json::exception& e) {
    fail("token shard metadata ", path, ": invalid JSON: ", e.what());
  }
  const std::string expected = kTokenShardFormatName;
  if (!meta.is_object() || !meta.contains("format") || meta["format"] != expected) {
    fail("token shard metadata ", path, ": \"format\" is not \"", expected,
         "\"; re-run titan tokenize");
  }
  if (!meta.contains("eos_id") || !meta["eos_id"].is_number_integer() ||
      meta["eos_id"].get<int64_t>() != eos_id) {
    fail("token shard metadata ", path, ": written with eos id ",
         meta.contains("eos_id") ? meta["eos_id"].dump() : "(none)", " but training uses ", eos_id,
         "; re-run titan tokenize with this tokenizer");
  }
  if (!meta.contains("shards") || !meta["shards"].is_array() || meta["shards"].empty()) {
    fail("token shard metadata ", path, ": no \"shards\" list");
  }
  const auto folder = std::filesystem::path(path).parent_path();
  std::vector<std::string> files;
  for (const auto& shard : meta["shards"]) {
    if (!shard.is_object() || !shard.contains("file") || !shard["file"].is_string()) {
      fail("token shard metadata ", path, ": a shard entry lacks its \"file\"");
    }
    files.push_back((folder / shard["file"].get<std::string>()).string());
  }
  return files;
}

// The token shard metadata files (PREFIX.json of titan tokenize) directly in folder `dir`, in
// name order; empty when it holds none.
std::vector<std::string> shard_metadata_in_folder(const std::string& dir) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string file = entry.path().string();
    if (!entry.is_regular_file() || !file.ends_with(".json")) continue;
    try {
      const nlohmann::json meta = nlohmann::json::parse(read_text_file(file));
      if (meta.is_object() && meta.value("format", std::string()) == kTokenShardFormatName)
        found.push_back(file);
    } catch (const std::exception&) {
      // Another kind of JSON file: not shard metadata.
    }
  }
  std::sort(found.begin(), found.end());
  return found;
}

}  // namespace

bool names_token_shards(const std::string& path) {
  return path.ends_with(".json") || path.ends_with(".bin");
}

namespace {

std::unique_ptr<TokenDocuments> open_single(const std::string& path,
                                            std::shared_ptr<const Tokenizer> tokenizer,
                                            int32_t eos_id, const std::string& text_field,
                                            std::shared_ptr<const ChatTemplate> chat_template) {
  if (chat_template) {
    TITAN_CHECK(
        !names_token_shards(path), "dataset ", path,
        ": SFT (training.sft) reads conversations from records (.jsonl, Parquet, Arrow), not "
        "token shards");
    // Whole records: a Parquet or Arrow file needs no text column.
    return std::make_unique<ChatDocuments>(DocumentSource::open(path, /*text_field=*/""),
                                           std::move(tokenizer), std::move(chat_template), eos_id);
  }
  std::vector<std::string> files;
  if (std::filesystem::is_directory(path)) {
    // A folder that titan tokenize wrote into: every set of shards its metadata lists.
    for (const std::string& meta : shard_metadata_in_folder(path))
      for (std::string& file : shards_of_metadata(meta, eos_id)) files.push_back(std::move(file));
    if (!files.empty())
      return std::make_unique<ShardDocuments>(path, files, eos_id, tokenizer->vocab_size());
  }
  if (!names_token_shards(path)) {
    return std::make_unique<TokenizedDocuments>(DocumentSource::open(path, text_field),
                                                std::move(tokenizer), eos_id);
  }
  if (path.ends_with(".json")) {
    files = shards_of_metadata(path, eos_id);
  } else if (is_glob(path)) {
    files = dataset_files(path);
  } else {
    files = {path};
  }
  return std::make_unique<ShardDocuments>(path, files, eos_id, tokenizer->vocab_size());
}

// Each entry opened as a single dataset; an error names the entry and the list.
std::unique_ptr<TokenDocuments> open_mixture(
    const std::string& list, const std::vector<DatasetEntry>& entries,
    const std::shared_ptr<const Tokenizer>& tokenizer, int32_t eos_id,
    const std::string& text_field, const std::shared_ptr<const ChatTemplate>& chat_template) {
  std::vector<MixtureDocuments::Source> sources;
  for (size_t i = 0; i < entries.size(); ++i) {
    const DatasetEntry& entry = entries[i];
    const std::string where = "entry " + std::to_string(i + 1) + " (\"" + entry.text +
                              "\") of dataset list \"" + list + "\"";
    std::error_code ec;
    TITAN_CHECK(is_glob(entry.path) || std::filesystem::exists(entry.path, ec), where, ": ",
                entry.path, " does not exist");
    try {
      sources.push_back(
          {open_single(entry.path, tokenizer, eos_id, text_field, chat_template), entry.weight});
      TITAN_CHECK(sources.back().documents->size() > 0, entry.path, " has no documents");
    } catch (const Error& e) {
      fail(where, ": ", e.what());
    }
  }
  return std::make_unique<MixtureDocuments>(list, std::move(sources));
}

}  // namespace

std::unique_ptr<TokenDocuments> open_token_documents(
    const std::string& path, std::shared_ptr<const Tokenizer> tokenizer, int32_t eos_id,
    const std::string& text_field, std::shared_ptr<const ChatTemplate> chat_template) {
  // A path that exists as written is one dataset even when it holds ',' or ':'.
  std::error_code ec;
  if (std::filesystem::exists(path, ec))
    return open_single(path, tokenizer, eos_id, text_field, chat_template);
  const std::vector<DatasetEntry> entries = parse_dataset_list(path);
  if (is_single_dataset(entries))
    return open_single(path, tokenizer, eos_id, text_field, chat_template);
  return open_mixture(path, entries, tokenizer, eos_id, text_field, chat_template);
}

}  // namespace titan::data
