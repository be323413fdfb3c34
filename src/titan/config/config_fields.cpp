#include "titan/config/config_fields.h"

#include <map>
#include <string_view>
#include <type_traits>

#include "titan/common/did_you_mean.h"
#include "titan/common/error.h"
#include "titan/common/strings.h"
#include "titan/config/field_values.h"

namespace titan::config {

std::vector<std::string> section_names() {
  std::vector<std::string> names;
  TrainerConfig config;
  auto on_section = [&](const char* name, auto&) { names.emplace_back(name); };
  config.visit_sections(on_section);
  return names;
}

std::vector<std::string> field_names(const std::string& section) {
  std::vector<std::string> names;
  bool found = false;
  TrainerConfig config;
  auto on_section = [&](const char* name, auto& fields) {
    if (section != name) return;
    found = true;
    auto on_field = [&](const char* field_name, auto&, const char* = "") {
      names.emplace_back(field_name);
    };
    fields.visit(on_field);
  };
  config.visit_sections(on_section);
  if (!found) fail_unknown_section(section, "config");
  return names;
}

bool has_field(const std::string& section, const std::string& key) {
  bool found = false;
  TrainerConfig config;
  auto on_section = [&](const char* name, auto& fields) {
    if (section != name) return;
    auto on_field = [&](const char* field_name, auto&, const char* = "") {
      found = found || key == field_name;
    };
    fields.visit(on_field);
  };
  config.visit_sections(on_section);
  return found;
}

void fail_unknown_section(const std::string& section, const std::string& where) {
  const auto accepted = section_names();
  fail(where, ": unknown config section \"", section, "\"", did_you_mean(section, accepted),
       "; accepted sections: ", join(accepted));
}

void fail_unknown_key(const std::string& section, const std::string& key,
                      const std::string& where) {
  const auto accepted = field_names(section);
  fail(where, ": unknown config key \"", key, "\" in section [", section, "]",
       did_you_mean(key, accepted), "; accepted keys: ", join(accepted));
}

std::pair<std::string, std::string> split_dotted_key(const std::string& dotted_key,
                                                     const std::string& where) {
  const size_t dot = dotted_key.find('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 == dotted_key.size()) {
    fail(where, ": expected a config key of the form section.key, got \"", dotted_key, "\"");
  }
  return {dotted_key.substr(0, dot), dotted_key.substr(dot + 1)};
}

bool is_bool_field(const std::string& section, const std::string& key, const std::string& where) {
  TrainerConfig config;
  bool is_bool = false;
  with_field(config, section, key, where,
             [&](auto& value) { is_bool = std::is_same_v<std::decay_t<decltype(value)>, bool>; });
  return is_bool;
}

void set_field_from_string(TrainerConfig& config, const std::string& section,
                           const std::string& key, const std::string& text,
                           const std::string& where) {
  with_field(config, section, key, where,
             [&](auto& value) { parse_cli_value(where, text, value); });
}

namespace {

// A field that exists for tests or benchmarks ([debug]'s hooks), by its description.
bool is_hook(const char* description) {
  const std::string_view d(description);
  return d.starts_with("test hook") || d.starts_with("benchmark hook");
}

// "section.key" -> the default's TOML text, of the hooks.
std::map<std::string, std::string> hook_defaults() {
  std::map<std::string, std::string> out;
  TrainerConfig defaults;
  auto on_section = [&](const char* section_name, auto& fields) {
    auto on_field = [&](const char* field_name, auto& value, const char* description = "") {
      if (is_hook(description))
        out[std::string(section_name) + "." + field_name] = format_toml_value(value);
    };
    fields.visit(on_field);
  };
  defaults.visit_sections(on_section);
  return out;
}

}  // namespace

std::string to_toml(const TrainerConfig& config, bool with_descriptions) {
  std::string out;
  // The described listing (titan configs --print) leaves out the test and benchmark hooks at
  // their defaults: they are not settings of a run. The plain one keeps every key.
  const std::map<std::string, std::string> hooks =
      with_descriptions ? hook_defaults() : std::map<std::string, std::string>{};
  auto on_section = [&](const char* section_name, auto& fields) {
    if (!out.empty()) out += "\n";
    // Appended piece by piece: GCC 12 warns falsely (-Wstringop-overflow) on the chained +.
    out.append("[").append(section_name).append("]\n");
    auto on_field = [&](const char* field_name, auto& value, const char* description = "") {
      const std::string text = format_toml_value(value);
      if (const auto hook = hooks.find(std::string(section_name) + "." + field_name);
          hook != hooks.end() && hook->second == text)
        return;
      if (with_descriptions && *description != '\0')
        out.append("# ").append(description).append("\n");
      out.append(field_name).append(" = ").append(text).append("\n");
    };
    fields.visit(on_field);
  };
  // visit() is non-const (the same list serves the writers), so print from a copy.
  TrainerConfig copy = config;
  copy.visit_sections(on_section);
  return out;
}

std::string field_description(const std::string& section, const std::string& key) {
  TrainerConfig config;
  std::string found;
  auto on_section = [&](const char* section_name, auto& fields) {
    if (section != section_name) return;
    auto on_field = [&](const char* field_name, auto&, const char* description = "") {
      if (key == field_name) found = description;
    };
    fields.visit(on_field);
  };
  config.visit_sections(on_section);
  return found;
}

}  // namespace titan::config
