// A .parquet file: one document per row. The row groups' row counts come from the footer at
// opening, so any row can be found without reading data; the text column (or, for record(),
// every column) of one row group at a time is decoded when a row of it is first asked for and
// kept until another row group is needed (documents are read in order, so each row group is
// decoded once per pass).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <arrow/chunked_array.h>
#include <arrow/table.h>
#include <parquet/arrow/reader.h>

#include "titan/data/document_source.h"

namespace titan::data {

class ParquetSource : public DocumentSource {
 public:
  ParquetSource(const std::string& path, std::string text_field);
  int64_t size() const override { return starts_.back(); }
  std::string text(int64_t index) override;
  // The row as a JSON object (row_json.h), e.g. a preference record's prompt, chosen, rejected.
  nlohmann::ordered_json record(int64_t index) override;
  std::string location(int64_t index) const override;  // "file, row N" (counting from 0)

 private:
  void load_row_group(int group);
  void load_record_group(int group);
  int group_of(int64_t index) const;

  std::string text_field_;
  std::unique_ptr<parquet::arrow::FileReader> reader_;
  int column_ = -1;              // the text column's index among the top-level fields
  std::vector<int64_t> starts_;  // starts_[g]: first row of row group g; back(): the row count
  int cached_group_ = -1;        // the row group whose text column cached_ holds
  std::shared_ptr<arrow::ChunkedArray> cached_;
  std::vector<int64_t> chunk_starts_;  // cached_'s chunks: first row of each, within the group
  int record_group_ = -1;              // the row group whose every column records_ holds
  std::shared_ptr<arrow::Table> records_;
};

}  // namespace titan::data
