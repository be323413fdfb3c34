// A row of a Parquet or Arrow table as the JSON object a .jsonl line would hold, so that record
// readers (SFT conversations, preference pairs) read every format alike: strings, numbers and
// booleans as themselves, lists as arrays, structs as objects in their fields' order, nulls as
// null (as Hugging Face datasets gives a missing struct field to Python: None).
#pragma once

#include <cstdint>
#include <string>

#include <arrow/array.h>
#include <nlohmann/json.hpp>

namespace titan::data {

// Element `row` of `array`. A type without a JSON form (binary, dates, maps, ...) is a
// DataReadError naming `path`, `column` and `file_row`.
nlohmann::ordered_json json_at(const arrow::Array& array, int64_t row, const std::string& path,
                               const std::string& column, int64_t file_row);

}  // namespace titan::data
