#include "titan/data/arrow/arrow_ipc_source.h"

#include <algorithm>
#include <cstring>
#include <exception>

#include <arrow/buffer.h>
#include <arrow/ipc/reader.h>
#include <arrow/record_batch.h>

#include "titan/common/error.h"
#include "titan/data/arrow/arrow_sources.h"
#include "titan/data/arrow/row_json.h"
#include "titan/data/arrow/string_column.h"

namespace titan::data {

std::unique_ptr<DocumentSource> open_arrow(const std::string& path, const std::string& text_field) {
  return std::make_unique<ArrowSource>(path, text_field);
}

ArrowSource::ArrowSource(const std::string& path, std::string text_field)
    : DocumentSource(path), text_field_(std::move(text_field)) {
  auto file = arrow::io::MemoryMappedFile::Open(path, arrow::io::FileMode::READ);
  check_arrow(file.status(), path, "cannot be opened");
  file_ = *file;
  // The file format starts with the magic "ARROW1"; the stream format with a schema message.
  constexpr char kMagic[] = "ARROW1";
  auto head = file_->ReadAt(0, 6);
  check_arrow(head.status(), path, "cannot be read");
  const bool file_format = (*head)->size() == 6 && std::memcmp((*head)->data(), kMagic, 6) == 0;
  try {
    read_batches(file_format);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    fail("dataset file ", path, ": not a valid Arrow IPC file: ", e.what());
  }
}

void ArrowSource::read_batches(bool file_format) {
  const std::string what = "not a valid Arrow IPC file";
  std::shared_ptr<arrow::Schema> schema;
  std::vector<std::shared_ptr<arrow::RecordBatch>> batches;
  if (file_format) {
    auto reader = arrow::ipc::RecordBatchFileReader::Open(file_);
    check_arrow(reader.status(), path_, what);
    schema = (*reader)->schema();
    if (!text_field_.empty()) column_ = find_text_column(*schema, path_, text_field_);
    for (int b = 0; b < (*reader)->num_record_batches(); ++b) {
      auto batch = (*reader)->ReadRecordBatch(b);
      check_arrow(batch.status(), path_, what);
      batches.push_back(*batch);
    }
  } else {
    auto reader = arrow::ipc::RecordBatchStreamReader::Open(file_);
    check_arrow(reader.status(), path_, what);
    schema = (*reader)->schema();
    if (!text_field_.empty()) column_ = find_text_column(*schema, path_, text_field_);
    for (;;) {
      std::shared_ptr<arrow::RecordBatch> batch;
      check_arrow((*reader)->ReadNext(&batch), path_, what);
      if (!batch) break;
      batches.push_back(std::move(batch));
    }
  }
  starts_.push_back(0);
  for (const auto& batch : batches) {
    // The structural check is cheap (no data is touched); the full one waits for text().
    check_arrow(batch->Validate(), path_, what);
    TITAN_CHECK(batch->schema()->Equals(*schema), "dataset file ", path_,
                ": a record batch's schema differs from the file's");
    if (column_ >= 0) batches_.push_back(batch->column(column_));
    starts_.push_back(starts_.back() + batch->num_rows());
    records_.push_back(batch);
  }
  checked_.assign(records_.size(), false);
  records_checked_.assign(records_.size(), false);
}

size_t ArrowSource::batch_of(int64_t index) const {
  TITAN_CHECK(index >= 0 && index < size(), "dataset file ", path_, ": row ", index,
              " is outside its ", size(), " rows");
  // The last batch starting at or before `index` (batches may be empty).
  const auto it = std::upper_bound(starts_.begin(), starts_.end() - 1, index) - 1;
  return static_cast<size_t>(it - starts_.begin());
}

std::string ArrowSource::text(int64_t index) {
  TITAN_CHECK(column_ >= 0, "dataset file ", path_, " was opened for whole records, not text");
  const size_t batch = batch_of(index);
  if (!checked_[batch]) {
    check_arrow_read(batches_[batch]->ValidateFull(), path_,
                     "record batch " + std::to_string(batch) + " (rows " +
                         std::to_string(starts_[batch]) + " to " +
                         std::to_string(starts_[batch + 1] - 1) + ") is corrupt");
    checked_[batch] = true;
  }
  return text_at(*batches_[batch], index - starts_[batch], path_, text_field_, index);
}

nlohmann::ordered_json ArrowSource::record(int64_t index) {
  const size_t batch = batch_of(index);
  const arrow::RecordBatch& rows = *records_[batch];
  if (!records_checked_[batch]) {
    check_arrow_read(rows.ValidateFull(), path_,
                     "record batch " + std::to_string(batch) + " (rows " +
                         std::to_string(starts_[batch]) + " to " +
                         std::to_string(starts_[batch + 1] - 1) + ") is corrupt");
    records_checked_[batch] = true;
  }
  const int64_t row = index - starts_[batch];
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (int c = 0; c < rows.num_columns(); ++c) {
    const std::string& name = rows.schema()->field(c)->name();
    out[name] = json_at(*rows.column(c), row, path_, name, index);
  }
  return out;
}

std::string ArrowSource::location(int64_t index) const {
  return path_ + ", row " + std::to_string(index);
}

}  // namespace titan::data
