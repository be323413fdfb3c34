// The documents of one dataset file, by index:
//   .jsonl, .jsonl.gz, .jsonl.zst  one JSON object per line with a string field (training.
//           dataset_text_field, default "text"); blank lines are skipped;
//   .parquet, .arrow  one document per row, the text from the string column of that name
//           (arrow/arrow_sources.h; needs a titan built with pyarrow present); an empty
//           text field opens a file for whole records only (record()), with no text column;
//   .txt    (or any other name) the whole file is one document;
//   a folder (its supported files, recursively) or a glob ("data/*.jsonl.zst"): every file
//           matched, in sorted path order, formats mixed freely; a folder written by HF datasets'
//           save_to_disk gives the .arrow files its state.json lists (saved_dataset.h).
// A bad line or row is a DataReadError naming file:line (file, row) when that document is read.
#pragma once

#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "titan/common/error.h"

namespace titan::data {

// A document that cannot be read while training runs (the file changed, vanished or became
// unreadable, or a record is malformed): the trainer saves a final checkpoint, then stops.
class DataReadError : public Error {
 public:
  using Error::Error;
};

template <class... Parts>
[[noreturn]] void fail_read(const Parts&... parts) {
  std::ostringstream out;
  detail::append(out, parts...);
  throw DataReadError(out.str());
}

// True when `path` holds glob characters (* ? [).
bool is_glob(const std::string& path);
// The files of a folder (recursively, hidden ones and unsupported names skipped; a save_to_disk
// folder's listed files) or every regular file a glob matches, sorted; throws titan::Error
// naming `path` when there is none.
std::vector<std::string> dataset_files(const std::string& path);

class DocumentSource {
 public:
  // Throws titan::Error naming `path` when it is missing or unreadable.
  static std::unique_ptr<DocumentSource> open(const std::string& path,
                                              const std::string& text_field = "text");
  virtual ~DocumentSource() = default;

  virtual int64_t size() const = 0;
  // Text of document `index` (0 <= index < size()); throws DataReadError. Not thread-safe
  // (reads through one stream).
  virtual std::string text(int64_t index) = 0;
  // The whole record of document `index` (a JSON object in its own key order: SFT reads its
  // "messages", DPO its "prompt", "chosen" and "rejected"); throws DataReadError. Record files
  // (.jsonl, and Parquet and Arrow rows as objects of their columns) have them.
  virtual nlohmann::ordered_json record(int64_t index);
  // Where document `index` is, for messages: "file:line" for a jsonl record, "file, row N" for
  // a Parquet or Arrow row, else the path.
  virtual std::string location(int64_t index) const;
  const std::string& path() const { return path_; }

 protected:
  explicit DocumentSource(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

// A .jsonl file, indexed once at opening (offset and line number of every non-blank line) so that
// any document can be read on demand, e.g. when a resumed run seeks to where it stopped. A
// compressed one (.jsonl.gz, .jsonl.zst) is decompressed into memory at opening; a plain one is
// read from the file as documents are needed.
class JsonlSource : public DocumentSource {
 public:
  JsonlSource(const std::string& path, std::string text_field);
  int64_t size() const override { return static_cast<int64_t>(lines_.size()); }
  std::string text(int64_t index) override;
  nlohmann::ordered_json record(int64_t index) override;
  std::string location(int64_t index) const override;

  struct Line {
    uint64_t offset, length, number;
  };

 private:
  std::string raw_line(const Line& line);
  std::vector<Line> lines_;
  std::string text_field_;
  bool in_memory_ = false;
  std::string content_;  // the decompressed file, when in_memory_
  std::ifstream in_;
};

// Several files read as one source, their documents one file after another (a folder's files
// or a glob's matches, in sorted path order).
class MultiFileSource : public DocumentSource {
 public:
  MultiFileSource(std::string description, std::vector<std::unique_ptr<DocumentSource>> files);
  int64_t size() const override { return starts_.back(); }
  std::string text(int64_t index) override;
  nlohmann::ordered_json record(int64_t index) override;
  std::string location(int64_t index) const override;

 private:
  size_t file_of(int64_t index) const;
  std::vector<std::unique_ptr<DocumentSource>> files_;
  std::vector<int64_t> starts_;  // starts_[i]: index of file i's first document; back(): total
};

// A plain text file: one document, the whole file.
class TextFileSource : public DocumentSource {
 public:
  explicit TextFileSource(const std::string& path);
  int64_t size() const override { return 1; }
  std::string text(int64_t index) override;
};

}  // namespace titan::data
