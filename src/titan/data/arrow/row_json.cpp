#include "titan/data/arrow/row_json.h"

#include "titan/data/document_source.h"

namespace titan::data {
namespace {

using Json = nlohmann::ordered_json;

template <class ArrayType>
Json number_at(const arrow::Array& array, int64_t row) {
  return static_cast<const ArrayType&>(array).Value(row);
}

Json elements(const arrow::Array& values, int64_t begin, int64_t end, const std::string& path,
              const std::string& column, int64_t file_row) {
  Json out = Json::array();
  for (int64_t i = begin; i < end; ++i) out.push_back(json_at(values, i, path, column, file_row));
  return out;
}

}  // namespace

Json json_at(const arrow::Array& array, int64_t row, const std::string& path,
             const std::string& column, int64_t file_row) {
  if (array.IsNull(row)) return Json();
  switch (array.type_id()) {
    case arrow::Type::NA:
      return Json();
    case arrow::Type::BOOL:
      return static_cast<const arrow::BooleanArray&>(array).Value(row);
    case arrow::Type::INT8:
      return number_at<arrow::Int8Array>(array, row);
    case arrow::Type::INT16:
      return number_at<arrow::Int16Array>(array, row);
    case arrow::Type::INT32:
      return number_at<arrow::Int32Array>(array, row);
    case arrow::Type::INT64:
      return number_at<arrow::Int64Array>(array, row);
    case arrow::Type::UINT8:
      return number_at<arrow::UInt8Array>(array, row);
    case arrow::Type::UINT16:
      return number_at<arrow::UInt16Array>(array, row);
    case arrow::Type::UINT32:
      return number_at<arrow::UInt32Array>(array, row);
    case arrow::Type::UINT64:
      return number_at<arrow::UInt64Array>(array, row);
    case arrow::Type::FLOAT:
      return number_at<arrow::FloatArray>(array, row);
    case arrow::Type::DOUBLE:
      return number_at<arrow::DoubleArray>(array, row);
    case arrow::Type::STRING:
      return std::string(static_cast<const arrow::StringArray&>(array).GetView(row));
    case arrow::Type::LARGE_STRING:
      return std::string(static_cast<const arrow::LargeStringArray&>(array).GetView(row));
    case arrow::Type::STRING_VIEW:
      return std::string(static_cast<const arrow::StringViewArray&>(array).GetView(row));
    case arrow::Type::LIST: {
      const auto& list = static_cast<const arrow::ListArray&>(array);
      return elements(*list.values(), list.value_offset(row), list.value_offset(row + 1), path,
                      column, file_row);
    }
    case arrow::Type::LARGE_LIST: {
      const auto& list = static_cast<const arrow::LargeListArray&>(array);
      return elements(*list.values(), list.value_offset(row), list.value_offset(row + 1), path,
                      column, file_row);
    }
    case arrow::Type::FIXED_SIZE_LIST: {
      const auto& list = static_cast<const arrow::FixedSizeListArray&>(array);
      return elements(*list.values(), list.value_offset(row),
                      list.value_offset(row) + list.value_length(row), path, column, file_row);
    }
    case arrow::Type::STRUCT: {
      const auto& record = static_cast<const arrow::StructArray&>(array);
      Json out = Json::object();
      for (int k = 0; k < record.num_fields(); ++k)
        out[record.struct_type()->field(k)->name()] =
            json_at(*record.field(k), row, path, column, file_row);
      return out;
    }
    default:
      fail_read("dataset file ", path, ", row ", file_row, " (counting from 0): column \"", column,
                "\" holds ", array.type()->ToString(),
                ", which has no JSON form (records read strings, numbers, booleans, lists and "
                "structs)");
  }
}

}  // namespace titan::data
