// What the Parquet and Arrow sources share: finding the text column in a schema, and reading one
// row of it as text, with errors that name the file, the column and the row.
#pragma once

#include <cstdint>
#include <string>

#include <arrow/array.h>
#include <arrow/status.h>
#include <arrow/type.h>

namespace titan::data {

// Index of the top-level field `column` of `schema`; throws titan::Error naming `path` when there
// is none (listing the columns present) or when it is not a string, large_string or string_view.
int find_text_column(const arrow::Schema& schema, const std::string& path,
                     const std::string& column);

// Text of element `row` of `array` (of a type find_text_column accepts); a null is a
// DataReadError naming `path`, the column and `file_row`, the row's index in the file.
std::string text_at(const arrow::Array& array, int64_t row, const std::string& path,
                    const std::string& column, int64_t file_row);

// Throw "dataset file PATH: WHAT: STATUS" unless `status` is ok: check_arrow as titan::Error
// (opening a file), check_arrow_read as DataReadError (reading a document while training runs).
void check_arrow(const arrow::Status& status, const std::string& path, const std::string& what);
void check_arrow_read(const arrow::Status& status, const std::string& path,
                      const std::string& what);

}  // namespace titan::data
