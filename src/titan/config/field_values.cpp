#include "titan/config/field_values.h"

#include <utf8proc.h>

#include <charconv>
#include <cmath>
#include <cstdio>

#include "titan/common/error.h"

namespace titan::config {
namespace {

// A config is saved and printed as TOML, whose strings are UTF-8: a value that is not could be
// set but never read back (found by tests/fuzz/config_fuzz.cpp).
void require_utf8(const std::string& key, const std::string& text) {
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(text.data());
  auto left = static_cast<utf8proc_ssize_t>(text.size());
  while (left > 0) {
    utf8proc_int32_t code_point = 0;
    const utf8proc_ssize_t n = utf8proc_iterate(p, left, &code_point);
    if (n <= 0) {
      fail(key, ": the value is not valid UTF-8 (byte ", text.size() - static_cast<size_t>(left),
           ")");
    }
    p += n;
    left -= n;
  }
}

std::string trim(const std::string& s) {
  const auto begin = s.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  const auto end = s.find_last_not_of(" \t");
  return s.substr(begin, end - begin + 1);
}

// "a, b,c" -> {"a", "b", "c"}; "" -> {}.
std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  if (trim(text).empty()) return items;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    items.push_back(trim(text.substr(start, comma - start)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return items;
}

}  // namespace

bool parse_int64(const std::string& text, int64_t& out) {
  const char* first = text.data();
  const char* last = first + text.size();
  int64_t value{};  // `out` changes only on success
  const auto [ptr, ec] = std::from_chars(first, last, value);
  if (ec != std::errc() || ptr != last || first == last) return false;
  out = value;
  return true;
}

bool parse_double(const std::string& text, double& out) {
  const char* first = text.data();
  const char* last = first + text.size();
  double value{};  // `out` changes only on success
  const auto [ptr, ec] = std::from_chars(first, last, value);
  if (ec != std::errc() || ptr != last || first == last) return false;
  out = value;
  return true;
}

void parse_cli_value(const std::string& key, const std::string& text, int64_t& out) {
  if (!parse_int64(text, out)) fail(key, ": expected an integer, got \"", text, "\"");
}

void parse_cli_value(const std::string& key, const std::string& text, double& out) {
  if (!parse_double(text, out)) fail(key, ": expected a number, got \"", text, "\"");
}

void parse_cli_value(const std::string& key, const std::string& text, bool& out) {
  if (text == "true") {
    out = true;
  } else if (text == "false") {
    out = false;
  } else {
    fail(key, ": expected true or false, got \"", text, "\"");
  }
}

void parse_cli_value(const std::string& key, const std::string& text, std::string& out) {
  require_utf8(key, text);
  out = text;
}

void parse_cli_value(const std::string& key, const std::string& text,
                     std::vector<std::string>& out) {
  require_utf8(key, text);
  out = split_list(text);
}

void parse_cli_value(const std::string& key, const std::string& text, std::vector<double>& out) {
  std::vector<double> values;
  for (const auto& item : split_list(text)) {
    double value = 0;
    if (!parse_double(item, value)) {
      fail(key, ": expected comma-separated numbers, got \"", text, "\" (\"", item,
           "\" is not a number)");
    }
    values.push_back(value);
  }
  out = std::move(values);
}

std::string format_toml_value(int64_t value) { return std::to_string(value); }

std::string format_toml_value(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  // Shortest text that reads back to exactly this double.
  char buffer[64];
  const auto [ptr, ec] = std::to_chars(buffer, buffer + sizeof(buffer), value);
  std::string text(buffer, ptr);
  // TOML reads "1" as an integer; keep floats recognisable as floats.
  if (text.find_first_of(".eE") == std::string::npos) text += ".0";
  return text;
}

std::string format_toml_value(bool value) { return value ? "true" : "false"; }

std::string format_toml_value(const std::string& value) {
  std::string out = "\"";
  for (const char c : value) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          char escaped[8];
          std::snprintf(escaped, sizeof(escaped), "\\u%04x", static_cast<unsigned char>(c));
          out += escaped;
        } else {
          out += c;  // UTF-8 passes through: TOML files are UTF-8
        }
    }
  }
  return out + "\"";
}

namespace {
template <class T>
std::string format_toml_list(const std::vector<T>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ", ";
    out += format_toml_value(values[i]);
  }
  return out + "]";
}
}  // namespace

std::string format_toml_value(const std::vector<std::string>& value) {
  return format_toml_list(value);
}
std::string format_toml_value(const std::vector<double>& value) { return format_toml_list(value); }

const char* type_description(const int64_t&) { return "an integer"; }
const char* type_description(const double&) { return "a number"; }
const char* type_description(const bool&) { return "a boolean"; }
const char* type_description(const std::string&) { return "a string"; }
const char* type_description(const std::vector<std::string>&) { return "a list of strings"; }
const char* type_description(const std::vector<double>&) { return "a list of numbers"; }

}  // namespace titan::config
