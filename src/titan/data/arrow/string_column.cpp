#include "titan/data/arrow/string_column.h"

#include <sstream>

#include "titan/common/error.h"
#include "titan/data/document_source.h"
#include "titan/data/setting_names.h"

namespace titan::data {

int find_text_column(const arrow::Schema& schema, const std::string& path,
                     const std::string& column) {
  const std::vector<int> found = schema.GetAllFieldIndices(column);
  if (found.empty()) {
    std::ostringstream present;
    for (int i = 0; i < schema.num_fields(); ++i)
      present << (i ? ", " : "") << schema.field(i)->name();
    fail("dataset file ", path, " has no column \"", column, "\" (", setting_names().text_field,
         "); its columns: ", present.str());
  }
  TITAN_CHECK(found.size() == 1, "dataset file ", path, " has ", found.size(), " columns named \"",
              column, "\"");
  const auto& type = *schema.field(found.front())->type();
  switch (type.id()) {
    case arrow::Type::STRING:
    case arrow::Type::LARGE_STRING:
    case arrow::Type::STRING_VIEW:
      return found.front();
    default:
      fail("dataset file ", path, ": column \"", column, "\" holds ", type.ToString(),
           ", not strings (", setting_names().text_field, " names the text column)");
  }
}

std::string text_at(const arrow::Array& array, int64_t row, const std::string& path,
                    const std::string& column, int64_t file_row) {
  if (array.IsNull(row))
    fail_read("dataset file ", path, ", row ", file_row, " (counting from 0): column \"", column,
              "\" is null");
  switch (array.type_id()) {
    case arrow::Type::STRING:
      return std::string(static_cast<const arrow::StringArray&>(array).GetView(row));
    case arrow::Type::LARGE_STRING:
      return std::string(static_cast<const arrow::LargeStringArray&>(array).GetView(row));
    case arrow::Type::STRING_VIEW:
      return std::string(static_cast<const arrow::StringViewArray&>(array).GetView(row));
    default:  // find_text_column accepted the schema; a batch of another type is a corrupt file
      fail_read("dataset file ", path, ", row ", file_row, ": column \"", column, "\" holds ",
                array.type()->ToString(), ", not strings");
  }
}

void check_arrow(const arrow::Status& status, const std::string& path, const std::string& what) {
  if (!status.ok()) fail("dataset file ", path, ": ", what, ": ", status.ToString());
}

void check_arrow_read(const arrow::Status& status, const std::string& path,
                      const std::string& what) {
  if (!status.ok()) fail_read("dataset file ", path, ": ", what, ": ", status.ToString());
}

}  // namespace titan::data
