#include "titan/config/toml_overlay.h"

// toml++ 3.3 (Debian 12) asserts in parse_key on a table header that starts with a character
// no key can start with ("[%", "[\x16"), then, with the assertion compiled out, reports it as
// the syntax error it is. Release builds compile its assertions out; so does every build here,
// so that the sanitizer/fuzz build (tests/fuzz/config_fuzz.cpp found this) runs what users run.
#define TOML_ASSERT(expr) static_cast<void>(0)
#include <toml++/toml.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <type_traits>

#include "titan/common/error.h"
#include "titan/config/config_fields.h"
#include "titan/config/field_values.h"

namespace titan::config {
namespace {

// "string \"ten\"", "float 1.5", "a table": what a TOML value is, for type errors.
std::string describe(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::string:
      return "string " + format_toml_value(std::string(*node.as_string()));
    case toml::node_type::integer:
      return "integer " + format_toml_value(node.as_integer()->get());
    case toml::node_type::floating_point:
      return "float " + format_toml_value(node.as_floating_point()->get());
    case toml::node_type::boolean:
      return std::string("boolean ") + (node.as_boolean()->get() ? "true" : "false");
    case toml::node_type::array:
      return "an array";
    case toml::node_type::table:
      return "a table";
    default:
      return "a date/time";
  }
}

// Reads one TOML value into a field of a given type; `key` ("training.steps") and `where`
// ("config file job.toml, line 3") name it in errors.
struct FieldReader {
  const toml::node& node;
  std::string key;
  std::string where;

  [[noreturn]] void wrong_type(const char* expected, const toml::node& value,
                               const std::string& item_key) const {
    fail(where, ": ", item_key, ": expected ", expected, ", got ", describe(value));
  }

  static bool read_scalar(const toml::node& value, int64_t& out) {
    if (!value.is_integer()) return false;
    out = value.as_integer()->get();
    return true;
  }
  static bool read_scalar(const toml::node& value, double& out) {
    if (value.is_floating_point()) {
      out = value.as_floating_point()->get();
    } else if (value.is_integer()) {
      out = static_cast<double>(value.as_integer()->get());  // 1 where 1.0 is meant is fine
    } else {
      return false;
    }
    return true;
  }
  static bool read_scalar(const toml::node& value, bool& out) {
    if (!value.is_boolean()) return false;
    out = value.as_boolean()->get();
    return true;
  }
  static bool read_scalar(const toml::node& value, std::string& out) {
    if (!value.is_string()) return false;
    out = std::string(*value.as_string());
    return true;
  }

  // Dataset paths also take an array of the entries of a dataset list ("a.jsonl:0.7", ...),
  // joined with ',' into the one string they stand for (data/dataset_list.h): the field stays
  // a string, prints as one and reads back the same.
  bool takes_dataset_list() const {
    return key == "training.dataset_path" || key == "validator.dataset_path";
  }
  void read_dataset_list(const toml::array& array, std::string& out) const {
    if (array.empty()) fail(where, ": ", key, ": the dataset list is empty");
    std::string joined;
    for (size_t i = 0; i < array.size(); ++i) {
      const std::string item_key = key + "[" + std::to_string(i) + "]";
      std::string entry;
      if (!read_scalar(array[i], entry)) wrong_type("a string", array[i], item_key);
      if (entry.find(',') != std::string::npos) {
        fail(where, ": ", item_key, ": ", format_toml_value(entry),
             " holds a ',', which separates the entries of a dataset list");
      }
      joined += (i ? "," : "") + entry;
    }
    out = std::move(joined);
  }

  template <class T>
  void operator()(T& out) const {
    if constexpr (std::is_same_v<T, std::string>) {
      if (node.is_array() && takes_dataset_list()) return read_dataset_list(*node.as_array(), out);
    }
    T value{};
    if (!read_scalar(node, value)) wrong_type(type_description(value), node, key);
    out = std::move(value);
  }

  template <class T>
  void operator()(std::vector<T>& out) const {
    const toml::array* array = node.as_array();
    if (array == nullptr) wrong_type(type_description(out), node, key);
    std::vector<T> values;
    for (size_t i = 0; i < array->size(); ++i) {
      T value{};
      if (!read_scalar((*array)[i], value)) {
        wrong_type(type_description(value), (*array)[i], key + "[" + std::to_string(i) + "]");
      }
      values.push_back(std::move(value));
    }
    out = std::move(values);
  }
};

std::string location(const std::string& source_name, const toml::node& node) {
  std::string where = "config file " + source_name;
  if (node.source().begin.line > 0) where += ", line " + std::to_string(node.source().begin.line);
  return where;
}

// TOML 1.0 allows non-ASCII characters only inside strings and comments. Checked before toml++
// sees the text: toml++ 3.3 (Debian 12) reaches __builtin_unreachable (undefined behaviour) when
// it tests some of them for whitespace between tokens, e.g. `steps \u01fe = 1` (found by
// tests/fuzz/config_fuzz.cpp). A small scanner that knows the four string forms and comments.
void check_non_ascii_placement(const std::string& text, const std::string& source_name) {
  enum class State { kCode, kComment, kBasic, kLiteral, kMultiBasic, kMultiLiteral };
  State state = State::kCode;
  size_t line = 1, line_start = 0;
  const auto starts = [&](size_t i, const char* token) { return text.compare(i, 3, token) == 0; };
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') {
      ++line;
      line_start = i + 1;
      if (state == State::kComment) state = State::kCode;
      continue;
    }
    switch (state) {
      case State::kCode:
        if (static_cast<unsigned char>(c) >= 0x80) {
          fail("config file ", source_name, ", line ", line, ", column ", i - line_start + 1,
               ": TOML syntax error: a non-ASCII character outside a string or comment");
        }
        if (c == '#') state = State::kComment;
        if (c == '"') state = starts(i, "\"\"\"") ? (i += 2, State::kMultiBasic) : State::kBasic;
        if (c == '\'')
          state = starts(i, "\'\'\'") ? (i += 2, State::kMultiLiteral) : State::kLiteral;
        break;
      case State::kComment:
        break;
      case State::kBasic:
      case State::kMultiBasic:
        if (c == '\\') {
          ++i;  // an escaped character, a quote among them
        } else if (state == State::kBasic && c == '"') {
          state = State::kCode;
        } else if (state == State::kMultiBasic && starts(i, "\"\"\"")) {
          i += 2;
          state = State::kCode;
        }
        break;
      case State::kLiteral:
        if (c == '\'') state = State::kCode;
        break;
      case State::kMultiLiteral:
        if (starts(i, "\'\'\'")) {
          i += 2;
          state = State::kCode;
        }
        break;
    }
  }
}

}  // namespace

void apply_toml_text(TrainerConfig& config, const std::string& text, const std::string& source_name,
                     std::set<std::string>* set_keys) {
  check_non_ascii_placement(text, source_name);
  toml::table document;
  try {
    document = toml::parse(text, source_name);
  } catch (const toml::parse_error& e) {
    fail("config file ", source_name, ", line ", e.source().begin.line, ", column ",
         e.source().begin.column, ": TOML syntax error: ", e.description());
  }
  for (const auto& [section_key, section_node] : document) {
    const std::string section(section_key.str());
    const std::string where = location(source_name, section_node);
    // Checked here, not only per key, so that the error points at the [section] line and an
    // empty unknown section is caught too.
    const auto accepted = section_names();
    if (std::find(accepted.begin(), accepted.end(), section) == accepted.end()) {
      fail_unknown_section(section, where);
    }
    const toml::table* fields = section_node.as_table();
    if (fields == nullptr) {
      // A top-level `key = value` or `[[section]]`: fields are accepted only inside [section].
      fail(where, ": \"", section, "\" must be a [", section, "] table, got ",
           describe(section_node));
    }
    for (const auto& [field_key, value] : *fields) {
      const std::string key(field_key.str());
      const std::string field_where = location(source_name, value);
      with_field(config, section, key, field_where,
                 FieldReader{value, section + "." + key, field_where});
      if (set_keys != nullptr) set_keys->insert(section + "." + key);
    }
  }
}

void apply_toml_file(TrainerConfig& config, const std::string& path,
                     std::set<std::string>* set_keys) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) fail("config file ", path, ": no such file");
  if (!std::filesystem::is_regular_file(path, ec)) fail("config file ", path, ": not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("config file ", path, ": cannot open (", std::strerror(errno), ")");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) fail("config file ", path, ": read error");
  apply_toml_text(config, text.str(), path, set_keys);
}

}  // namespace titan::config
