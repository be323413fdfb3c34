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

#include "titan/common/did_you_mean.h"
#include "titan/common/error.h"
#include "titan/common/strings.h"
#include "titan/config/config_fields.h"
#include "titan/config/field_values.h"
#include "titan/config/torchtitan_keys.h"

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

// A TOML value as it would be written on the command line: true, 5, 0.5, c4, a,b (a list).
std::string command_line_text(const toml::node& node) {
  if (node.is_string()) return std::string(*node.as_string());
  if (node.is_boolean()) return node.as_boolean()->get() ? "true" : "false";
  if (node.is_integer()) return std::to_string(node.as_integer()->get());
  if (node.is_floating_point()) return format_toml_value(node.as_floating_point()->get());
  if (const toml::array* array = node.as_array()) {
    std::string joined;
    for (size_t i = 0; i < array->size(); ++i)
      joined.append(i ? "," : "").append(command_line_text((*array)[i]));
    return joined;
  }
  return describe(node);
}

// A key of torchtitan's that titan's tree lacks (torchtitan_keys.h): renamed into its titan
// field, noted, or refused. `key` is dotted ("quantize.linear.float8.filter_fqns").
// Notes of one file, by line (toml++ visits a table's keys in name order).
using LineNotes = std::vector<std::pair<uint32_t, std::string>>;

void apply_torchtitan_key(TrainerConfig& config, const std::string& key, const toml::node& value,
                          const std::string& source_name, std::set<std::string>* set_keys,
                          LineNotes& notes) {
  if (const toml::table* table = value.as_table()) {
    // [quantize.linear.float8] and friends: every key under it.
    for (const auto& [inner_key, inner_value] : *table) {
      apply_torchtitan_key(config, key + "." + std::string(inner_key.str()), inner_value,
                           source_name, set_keys, notes);
    }
    return;
  }
  const std::string where = location(source_name, value);
  const std::string text = command_line_text(value);
  const std::optional<TorchtitanKey> rule = torchtitan_key(key, text);
  if (!rule) {
    const size_t dot = key.find('.');
    const std::string section = key.substr(0, dot), field = key.substr(dot + 1);
    const auto titan_sections = section_names();
    if (std::find(titan_sections.begin(), titan_sections.end(), section) != titan_sections.end())
      fail_unknown_key(section, field, where);
    // A section of torchtitan's that titan takes key by key ([validation], [compile], ...).
    fail(where, ": unknown config key \"", field, "\" in torchtitan's section [", section, "]",
         did_you_mean(field, torchtitan_section_keys(section)),
         "; the keys titan takes there: ", join(torchtitan_section_keys(section)));
  }
  const std::string shown =
      key + " = " + (value.is_string() ? format_toml_value(text) : command_line_text(value));
  switch (rule->action) {
    case TorchtitanKey::Action::kRefuse:
      fail(where, ": ", shown, ": ", rule->message);
    case TorchtitanKey::Action::kNote:
      notes.emplace_back(value.source().begin.line, where + ": " + shown + ": " + rule->message);
      return;
    case TorchtitanKey::Action::kRename:
      break;
  }
  const size_t dot = rule->titan_key.find('.');
  const std::string section = rule->titan_key.substr(0, dot),
                    field = rule->titan_key.substr(dot + 1);
  if (rule->index >= 0) {
    // One element of a list (torchtitan's optimizer.beta1 is titan's optimizer.betas[0]).
    double element = 0;
    if (!FieldReader::read_scalar(value, element))
      fail(where, ": ", key, ": expected a number, got ", describe(value));
    with_field(config, section, field, where, [&](auto& list) {
      if constexpr (std::is_same_v<std::decay_t<decltype(list)>, std::vector<double>>) {
        if (list.size() <= static_cast<size_t>(rule->index)) list.resize(rule->index + 1, 0.0);
        list[rule->index] = element;
      }
    });
  } else if (!rule->value.empty()) {
    set_field_from_string(config, section, field, rule->value, where);
  } else {
    with_field(config, section, field, where, FieldReader{value, rule->titan_key, where});
  }
  if (set_keys != nullptr) set_keys->insert(rule->titan_key);
  notes.emplace_back(value.source().begin.line, where + ": " + shown + ": " + rule->message);
}

}  // namespace

void apply_toml_text(TrainerConfig& config, const std::string& text, const std::string& source_name,
                     std::set<std::string>* set_keys, std::vector<std::string>* notes) {
  check_non_ascii_placement(text, source_name);
  toml::table document;
  try {
    document = toml::parse(text, source_name);
  } catch (const toml::parse_error& e) {
    fail("config file ", source_name, ", line ", e.source().begin.line, ", column ",
         e.source().begin.column, ": TOML syntax error: ", e.description());
  }
  LineNotes file_notes;
  for (const auto& [section_key, section_node] : document) {
    const std::string section(section_key.str());
    const std::string where = location(source_name, section_node);
    // Checked here, not only per key, so that the error points at the [section] line and an
    // empty unknown section is caught too.
    const auto accepted = section_names();
    const bool titan_section =
        std::find(accepted.begin(), accepted.end(), section) != accepted.end();
    if (!titan_section && !is_torchtitan_section(section)) fail_unknown_section(section, where);
    const toml::table* fields = section_node.as_table();
    if (fields == nullptr) {
      // A top-level `key = value` or `[[section]]`: fields are accepted only inside [section].
      fail(where, ": \"", section, "\" must be a [", section, "] table, got ",
           describe(section_node));
    }
    for (const auto& [field_key, value] : *fields) {
      const std::string key(field_key.str());
      const std::string field_where = location(source_name, value);
      if (!titan_section || !has_field(section, key)) {
        apply_torchtitan_key(config, section + "." + key, value, source_name, set_keys, file_notes);
        continue;
      }
      with_field(config, section, key, field_where,
                 FieldReader{value, section + "." + key, field_where});
      if (set_keys != nullptr) set_keys->insert(section + "." + key);
    }
  }
  std::stable_sort(file_notes.begin(), file_notes.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  if (notes != nullptr)
    for (auto& [line, note] : file_notes) notes->push_back(std::move(note));
}

void apply_toml_file(TrainerConfig& config, const std::string& path,
                     std::set<std::string>* set_keys, std::vector<std::string>* notes) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) fail("config file ", path, ": no such file");
  if (!std::filesystem::is_regular_file(path, ec)) fail("config file ", path, ": not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("config file ", path, ": cannot open (", std::strerror(errno), ")");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) fail("config file ", path, ": read error");
  apply_toml_text(config, text.str(), path, set_keys, notes);
}

}  // namespace titan::config
