// Conversions for the six value types a config field can have (int64, double, bool, string,
// list of strings, list of doubles): parsing a command-line string and writing a TOML value.
// Overloaded on the field's type so the generic code in config_fields.cpp can call them from
// inside a visit() without knowing which type it holds.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace titan::config {

// Parse `text` (a command-line value) into `out`. `key` names the field in error messages,
// e.g. "--training.steps". Lists are comma-separated; an empty string is an empty list.
void parse_cli_value(const std::string& key, const std::string& text, int64_t& out);
void parse_cli_value(const std::string& key, const std::string& text, double& out);
void parse_cli_value(const std::string& key, const std::string& text, bool& out);
void parse_cli_value(const std::string& key, const std::string& text, std::string& out);
void parse_cli_value(const std::string& key, const std::string& text,
                     std::vector<std::string>& out);
void parse_cli_value(const std::string& key, const std::string& text, std::vector<double>& out);

// The value as TOML source text that reads back to the same value (doubles round-trip
// exactly and always look like floats, strings are quoted and escaped).
std::string format_toml_value(int64_t value);
std::string format_toml_value(double value);
std::string format_toml_value(bool value);
std::string format_toml_value(const std::string& value);
std::string format_toml_value(const std::vector<std::string>& value);
std::string format_toml_value(const std::vector<double>& value);

// Human names of the types, for error messages and help ("an integer", "a list of floats").
const char* type_description(const int64_t&);
const char* type_description(const double&);
const char* type_description(const bool&);
const char* type_description(const std::string&);
const char* type_description(const std::vector<std::string>&);
const char* type_description(const std::vector<double>&);

// Strict number parsing of a whole string (no surrounding text); false when it is not one.
bool parse_int64(const std::string& text, int64_t& out);
bool parse_double(const std::string& text, double& out);

}  // namespace titan::config
