#include "titan/config/config_fields.h"

#include <algorithm>
#include <type_traits>

#include "titan/common/error.h"
#include "titan/common/strings.h"
#include "titan/config/field_values.h"

namespace titan::config {
namespace {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// " (did you mean \"steps\"?)" when a name is close enough to be a likely typo.
std::string suggestion(const std::string& name, const std::vector<std::string>& accepted) {
  std::string best;
  size_t best_distance = std::max<size_t>(2, name.size() / 3) + 1;
  for (const auto& candidate : accepted) {
    const size_t d = edit_distance(name, candidate);
    if (d < best_distance) {
      best_distance = d;
      best = candidate;
    }
  }
  return best.empty() ? "" : " (did you mean \"" + best + "\"?)";
}

}  // namespace

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
    auto on_field = [&](const char* field_name, auto&) { names.emplace_back(field_name); };
    fields.visit(on_field);
  };
  config.visit_sections(on_section);
  if (!found) fail_unknown_section(section, "config");
  return names;
}

void fail_unknown_section(const std::string& section, const std::string& where) {
  const auto accepted = section_names();
  fail(where, ": unknown config section \"", section, "\"", suggestion(section, accepted),
       "; accepted sections: ", join(accepted));
}

void fail_unknown_key(const std::string& section, const std::string& key,
                      const std::string& where) {
  const auto accepted = field_names(section);
  fail(where, ": unknown config key \"", key, "\" in section [", section, "]",
       suggestion(key, accepted), "; accepted keys: ", join(accepted));
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

std::string to_toml(const TrainerConfig& config) {
  std::string out;
  auto on_section = [&](const char* section_name, auto& fields) {
    if (!out.empty()) out += "\n";
    // Appended piece by piece: GCC 12 warns falsely (-Wstringop-overflow) on the chained +.
    out.append("[").append(section_name).append("]\n");
    auto on_field = [&](const char* field_name, auto& value) {
      out.append(field_name).append(" = ").append(format_toml_value(value)).append("\n");
    };
    fields.visit(on_field);
  };
  // visit() is non-const (the same list serves the writers), so print from a copy.
  TrainerConfig copy = config;
  copy.visit_sections(on_section);
  return out;
}

}  // namespace titan::config
