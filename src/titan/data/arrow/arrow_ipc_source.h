// A .arrow file: Arrow IPC in the stream format (what HF datasets' save_to_disk writes) or the
// file format. The file is memory-mapped and its record batches are read at opening: they are
// views into the mapping, so this costs their metadata only, the text itself is paged in by the
// system as rows are read (and may be paged out again). Each batch's text column is checked in
// full (offsets, UTF-8) the first time a row of it is read, since the file is untrusted.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <arrow/array.h>
#include <arrow/io/file.h>
#include <arrow/record_batch.h>

#include "titan/data/document_source.h"

namespace titan::data {

class ArrowSource : public DocumentSource {
 public:
  ArrowSource(const std::string& path, std::string text_field);
  int64_t size() const override { return starts_.back(); }
  std::string text(int64_t index) override;
  // The row as a JSON object (row_json.h), e.g. a preference record's prompt, chosen, rejected.
  nlohmann::ordered_json record(int64_t index) override;
  std::string location(int64_t index) const override;  // "file, row N" (counting from 0)

 private:
  void read_batches(bool file_format);
  size_t batch_of(int64_t index) const;

  std::string text_field_;
  std::shared_ptr<arrow::io::MemoryMappedFile> file_;
  int column_ = -1;  // the text column's index among the top-level fields
  std::vector<std::shared_ptr<arrow::RecordBatch>> records_;  // the record batches
  std::vector<std::shared_ptr<arrow::Array>> batches_;        // each record batch's text column
  std::vector<int64_t> starts_;        // starts_[b]: first row of batch b; back(): the row count
  std::vector<bool> checked_;          // batch b's text column passed ValidateFull
  std::vector<bool> records_checked_;  // batch b passed ValidateFull
};

}  // namespace titan::data
