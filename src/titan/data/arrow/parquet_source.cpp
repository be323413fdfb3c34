#include "titan/data/arrow/parquet_source.h"

#include <algorithm>
#include <exception>

#include <arrow/io/file.h>
#include <parquet/exception.h>
#include <parquet/metadata.h>

#include "titan/common/error.h"
#include "titan/data/arrow/arrow_sources.h"
#include "titan/data/arrow/row_json.h"
#include "titan/data/arrow/string_column.h"

namespace titan::data {

std::unique_ptr<DocumentSource> open_parquet(const std::string& path,
                                             const std::string& text_field) {
  return std::make_unique<ParquetSource>(path, text_field);
}

ParquetSource::ParquetSource(const std::string& path, std::string text_field)
    : DocumentSource(path), text_field_(std::move(text_field)) {
  // The Parquet library reports most problems as a Status, but some (a corrupt footer) as a
  // parquet::ParquetException; both become one titan::Error naming the file.
  try {
    auto file = arrow::io::ReadableFile::Open(path);
    check_arrow(file.status(), path, "cannot be opened");
    auto reader = parquet::arrow::OpenFile(*file, arrow::default_memory_pool());
    check_arrow(reader.status(), path, "not a valid Parquet file");
    reader_ = std::move(*reader);
    std::shared_ptr<arrow::Schema> schema;
    check_arrow(reader_->GetSchema(&schema), path, "cannot read the Parquet schema");
    // Readers of whole records (text_field "") need no text column.
    if (!text_field_.empty()) column_ = find_text_column(*schema, path, text_field_);
    const auto metadata = reader_->parquet_reader()->metadata();
    starts_.push_back(0);
    for (int g = 0; g < metadata->num_row_groups(); ++g)
      starts_.push_back(starts_.back() + metadata->RowGroup(g)->num_rows());
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    fail("dataset file ", path, ": not a valid Parquet file: ", e.what());
  }
}

void ParquetSource::load_row_group(int group) {
  cached_group_ = -1;  // until the new group is complete
  cached_.reset();
  const std::string what = "cannot read row group " + std::to_string(group) + " (rows " +
                           std::to_string(starts_[group]) + " to " +
                           std::to_string(starts_[group + 1] - 1) + ")";
  std::shared_ptr<arrow::ChunkedArray> column;
  try {
    check_arrow_read(reader_->RowGroup(group)->Column(column_)->Read(&column), path_, what);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    fail_read("dataset file ", path_, ": ", what, ": ", e.what());
  }
  if (column->length() != starts_[group + 1] - starts_[group])
    fail_read("dataset file ", path_, ": ", what, ": ", column->length(),
              " values where the footer says ", starts_[group + 1] - starts_[group]);
  chunk_starts_.assign(1, 0);
  for (const auto& chunk : column->chunks()) {
    // Decoded data is well formed by construction; this also checks the strings are UTF-8, as
    // the jsonl reader does.
    check_arrow_read(chunk->ValidateFull(), path_, what);
    chunk_starts_.push_back(chunk_starts_.back() + chunk->length());
  }
  cached_ = std::move(column);
  cached_group_ = group;
}

int ParquetSource::group_of(int64_t index) const {
  TITAN_CHECK(index >= 0 && index < size(), "dataset file ", path_, ": row ", index,
              " is outside its ", size(), " rows");
  // The last row group starting at or before `index` (row groups may be empty).
  const auto group_it = std::upper_bound(starts_.begin(), starts_.end() - 1, index) - 1;
  return static_cast<int>(group_it - starts_.begin());
}

std::string ParquetSource::text(int64_t index) {
  TITAN_CHECK(column_ >= 0, "dataset file ", path_, " was opened for whole records, not text");
  const int group = group_of(index);
  if (group != cached_group_) load_row_group(group);
  const int64_t row = index - starts_[group];
  const auto chunk_it = std::upper_bound(chunk_starts_.begin(), chunk_starts_.end() - 1, row) - 1;
  const size_t chunk = static_cast<size_t>(chunk_it - chunk_starts_.begin());
  return text_at(*cached_->chunk(static_cast<int>(chunk)), row - *chunk_it, path_, text_field_,
                 index);
}

void ParquetSource::load_record_group(int group) {
  record_group_ = -1;  // until the new group is complete
  records_.reset();
  const std::string what = "cannot read row group " + std::to_string(group) + " (rows " +
                           std::to_string(starts_[group]) + " to " +
                           std::to_string(starts_[group + 1] - 1) + ")";
  std::shared_ptr<arrow::Table> table;
  try {
    check_arrow_read(reader_->RowGroup(group)->ReadTable(&table), path_, what);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    fail_read("dataset file ", path_, ": ", what, ": ", e.what());
  }
  if (table->num_rows() != starts_[group + 1] - starts_[group])
    fail_read("dataset file ", path_, ": ", what, ": ", table->num_rows(),
              " rows where the footer says ", starts_[group + 1] - starts_[group]);
  // One chunk per column, so that a row is found by its index alone.
  auto combined = table->CombineChunks();
  check_arrow_read(combined.status(), path_, what);
  check_arrow_read((*combined)->ValidateFull(), path_, what);
  records_ = std::move(*combined);
  record_group_ = group;
}

nlohmann::ordered_json ParquetSource::record(int64_t index) {
  const int group = group_of(index);
  if (group != record_group_) load_record_group(group);
  const int64_t row = index - starts_[group];
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (int c = 0; c < records_->num_columns(); ++c) {
    const std::string& name = records_->schema()->field(c)->name();
    const auto& chunks = records_->column(c)->chunks();
    out[name] = chunks.empty() ? nlohmann::ordered_json()
                               : json_at(*chunks.front(), row, path_, name, index);
  }
  return out;
}

std::string ParquetSource::location(int64_t index) const {
  return path_ + ", row " + std::to_string(index);
}

}  // namespace titan::data
