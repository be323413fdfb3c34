// A .parquet file: one document per row. The row groups' row counts come from the footer at
// opening, so any row can be found without reading data; the text column of one row group at a
// time is decoded when a row of it is first asked for and kept until another row group is needed
// (documents are read in order, so each row group is decoded once per pass).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <arrow/chunked_array.h>
#include <parquet/arrow/reader.h>

#include "titan/data/document_source.h"

namespace titan::data {

class ParquetSource : public DocumentSource {
 public:
  ParquetSource(const std::string& path, std::string text_field);
  int64_t size() const override { return starts_.back(); }
  std::string text(int64_t index) override;

 private:
  void load_row_group(int group);

  std::string text_field_;
  std::unique_ptr<parquet::arrow::FileReader> reader_;
  int column_ = -1;              // the text column's index among the top-level fields
  std::vector<int64_t> starts_;  // starts_[g]: first row of row group g; back(): the row count
  int cached_group_ = -1;        // the row group whose text column cached_ holds
  std::shared_ptr<arrow::ChunkedArray> cached_;
  std::vector<int64_t> chunk_starts_;  // cached_'s chunks: first row of each, within the group
};

}  // namespace titan::data
