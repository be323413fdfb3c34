#include "titan/data/document_source.h"

#include <glob.h>

#include <algorithm>
#include <filesystem>
#include <sstream>

#include <nlohmann/json.hpp>

#include "titan/common/error.h"
#include "titan/data/arrow/arrow_sources.h"
#include "titan/data/decompress.h"
#include "titan/data/saved_dataset.h"
#include "titan/data/setting_names.h"

namespace titan::data {
namespace {

bool is_blank(const char* p, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r') return false;
  return true;
}

void check_readable(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) fail("dataset file ", path, " not found");
  if (std::filesystem::is_directory(path, ec))
    fail("dataset file ", path, " is a directory, not a file");
}

// Finds the non-blank lines of a file given block by block.
class LineIndexer {
 public:
  explicit LineIndexer(std::vector<JsonlSource::Line>& lines) : lines_(lines) {}
  void feed(const char* block, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      if (block[i] == '\n') {
        if (!blank_) lines_.push_back({line_start_, offset_ + i - line_start_, number_});
        line_start_ = offset_ + i + 1;
        ++number_;
        blank_ = true;
      } else if (blank_ && !is_blank(&block[i], 1)) {
        blank_ = false;
      }
    }
    offset_ += n;
  }
  void finish() {
    if (!blank_) lines_.push_back({line_start_, offset_ - line_start_, number_});
  }

 private:
  std::vector<JsonlSource::Line>& lines_;
  uint64_t offset_ = 0, line_start_ = 0, number_ = 1;
  bool blank_ = true;  // so far, the current line holds only blanks
};

bool is_supported_name(const std::string& name) {
  return name.ends_with(".jsonl") || name.ends_with(".jsonl.gz") || name.ends_with(".jsonl.zst") ||
         name.ends_with(".txt") || name.ends_with(".parquet") || name.ends_with(".arrow");
}

// The files of a folder, recursively; a saved Dataset's folder (saved_dataset.h) contributes the
// files its state.json lists and nothing else.
std::vector<std::string> folder_files(const std::string& path) {
  if (auto saved = saved_dataset_files(path)) return *saved;
  std::vector<std::string> files;
  namespace fs = std::filesystem;
  for (auto it = fs::recursive_directory_iterator(path); it != fs::recursive_directory_iterator();
       ++it) {
    const std::string name = it->path().filename().string();
    if (it->is_directory() && !name.starts_with(".")) {
      if (auto saved = saved_dataset_files(it->path().string())) {
        files.insert(files.end(), saved->begin(), saved->end());
        it.disable_recursion_pending();
      }
    } else if (it->is_regular_file() && !name.starts_with(".") && is_supported_name(name)) {
      files.push_back(it->path().string());
    }
  }
  TITAN_CHECK(!files.empty(), "dataset folder ", path,
              " has no .jsonl, .jsonl.gz, .jsonl.zst, .txt, .parquet or .arrow file");
  // Sorted by path, so the order does not depend on the file system (save_to_disk names its
  // files data-00000-of-00002.arrow, ..., so their sorted order is state.json's).
  std::sort(files.begin(), files.end());
  return files;
}

std::unique_ptr<DocumentSource> open_file(const std::string& path, const std::string& text_field) {
  check_readable(path);
  if (path.ends_with(".jsonl") || path.ends_with(".jsonl.gz") || path.ends_with(".jsonl.zst"))
    return std::make_unique<JsonlSource>(path, text_field);
  if (path.ends_with(".parquet")) return open_parquet(path, text_field);
  if (path.ends_with(".arrow")) return open_arrow(path, text_field);
  if (is_compressed(path))
    fail("dataset file ", path, ": compressed files are read as .jsonl.gz or .jsonl.zst");
  if (path.ends_with(".bin"))
    fail("dataset file ", path,
         ": token shards are read on their own, not mixed with text; "
         "set training.dataset_path to their PREFIX.json");
  return std::make_unique<TextFileSource>(path);
}

}  // namespace

bool is_glob(const std::string& path) { return path.find_first_of("*?[") != std::string::npos; }

std::vector<std::string> dataset_files(const std::string& path) {
  if (!is_glob(path)) return folder_files(path);
  std::vector<std::string> files;
  glob_t matches{};
  const int rc = ::glob(path.c_str(), 0, nullptr, &matches);
  for (size_t i = 0; rc == 0 && i < matches.gl_pathc; ++i)
    if (std::filesystem::is_regular_file(matches.gl_pathv[i])) files.push_back(matches.gl_pathv[i]);
  globfree(&matches);
  TITAN_CHECK(!files.empty(), "dataset glob ", path, " matches no file");
  std::sort(files.begin(), files.end());
  return files;
}

std::unique_ptr<DocumentSource> DocumentSource::open(const std::string& path,
                                                     const std::string& text_field) {
  std::error_code ec;
  if (!is_glob(path) && !std::filesystem::is_directory(path, ec))
    return open_file(path, text_field);
  std::vector<std::unique_ptr<DocumentSource>> sources;
  for (const std::string& file : dataset_files(path))
    sources.push_back(open_file(file, text_field));
  if (sources.size() == 1) return std::move(sources.front());
  return std::make_unique<MultiFileSource>(path, std::move(sources));
}

MultiFileSource::MultiFileSource(std::string description,
                                 std::vector<std::unique_ptr<DocumentSource>> files)
    : DocumentSource(std::move(description)), files_(std::move(files)) {
  starts_.push_back(0);
  for (const auto& f : files_) starts_.push_back(starts_.back() + f->size());
}

nlohmann::ordered_json DocumentSource::record(int64_t index) {
  fail_read("dataset file ", location(index),
            " is not a file of records; SFT and preference pairs read .jsonl, Parquet or Arrow "
            "records");
}

std::string DocumentSource::location(int64_t) const { return path_; }

size_t MultiFileSource::file_of(int64_t index) const {
  // The last file whose first document is at or before `index` (files may hold no document).
  const auto it = std::upper_bound(starts_.begin(), starts_.end() - 1, index);
  return static_cast<size_t>(it - starts_.begin()) - 1;
}

std::string MultiFileSource::text(int64_t index) {
  const size_t file = file_of(index);
  return files_[file]->text(index - starts_[file]);
}

nlohmann::ordered_json MultiFileSource::record(int64_t index) {
  const size_t file = file_of(index);
  return files_[file]->record(index - starts_[file]);
}

std::string MultiFileSource::location(int64_t index) const {
  const size_t file = file_of(index);
  return files_[file]->location(index - starts_[file]);
}

JsonlSource::JsonlSource(const std::string& path, std::string text_field)
    : DocumentSource(path), text_field_(std::move(text_field)), in_memory_(is_compressed(path)) {
  LineIndexer indexer(lines_);
  if (in_memory_) {
    content_ = decompress_file(path);
    indexer.feed(content_.data(), content_.size());
  } else {
    in_.open(path, std::ios::binary);
    if (!in_) fail("dataset file ", path, " cannot be opened");
    // One pass in 1 MiB blocks to find the line boundaries.
    std::vector<char> block(1 << 20);
    while (in_) {
      in_.read(block.data(), static_cast<std::streamsize>(block.size()));
      const auto n = static_cast<size_t>(in_.gcount());
      if (n == 0) break;
      indexer.feed(block.data(), n);
    }
    in_.clear();
  }
  indexer.finish();
}

std::string JsonlSource::raw_line(const Line& line) {
  if (in_memory_) return content_.substr(line.offset, line.length);
  std::string raw(line.length, '\0');
  in_.seekg(static_cast<std::streamoff>(line.offset));
  in_.read(raw.data(), static_cast<std::streamsize>(raw.size()));
  if (static_cast<uint64_t>(in_.gcount()) != line.length) {
    in_.clear();
    fail_read("dataset file ", path_, ":", line.number, ": cannot read the line (file changed?)");
  }
  return raw;
}

std::string JsonlSource::location(int64_t index) const {
  return path_ + ":" + std::to_string(lines_.at(static_cast<size_t>(index)).number);
}

nlohmann::ordered_json JsonlSource::record(int64_t index) {
  const Line& line = lines_.at(static_cast<size_t>(index));
  const std::string raw = raw_line(line);
  nlohmann::ordered_json j;
  try {
    j = nlohmann::ordered_json::parse(raw);
  } catch (const nlohmann::json::exception& e) {
    fail_read("dataset file ", path_, ":", line.number, ": invalid JSON: ", e.what());
  }
  if (!j.is_object()) fail_read("dataset file ", path_, ":", line.number, ": not a JSON object");
  return j;
}

std::string JsonlSource::text(int64_t index) {
  const Line& line = lines_.at(static_cast<size_t>(index));
  nlohmann::ordered_json j = record(index);
  if (!j.contains(text_field_) || !j[text_field_].is_string()) {
    // A chat dataset read as plain text: the likely fix is one flag away.
    const bool conversation =
        !j.contains(text_field_) && (j.contains("messages") || j.contains("conversations"));
    fail_read("dataset file ", path_, ":", line.number,
              ": expected an object with a string field \"", text_field_, "\" (",
              setting_names().text_field, ")",
              conversation ? "; this record is a conversation (\"messages\" or ShareGPT's "
                             "\"conversations\"): " +
                                 setting_names().sft + " reads chat records"
                           : std::string());
  }
  return std::move(j[text_field_].get_ref<std::string&>());
}

TextFileSource::TextFileSource(const std::string& path) : DocumentSource(path) {}

std::string TextFileSource::text(int64_t index) {
  std::ifstream in(path_, std::ios::binary);
  if (!in) fail_read("dataset file ", path_, " cannot be opened");
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

}  // namespace titan::data
