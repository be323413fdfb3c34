// Generic code over the visit() lists of trainer_config.h: names of sections and keys,
// setting one field from a command-line string, and printing the whole tree as TOML.
// visit() calls v(name, field, description); the visitors here default the description so that
// they also accept a field listed without one (the unit tests require every field to have one).
// Nothing here names a particular field, so a field added to trainer_config.h works
// everywhere at once.
#pragma once

#include <string>
#include <vector>

#include "titan/config/trainer_config.h"

namespace titan::config {

// Section names, in printing order, and the keys of one section in visit order.
std::vector<std::string> section_names();
std::vector<std::string> field_names(const std::string& section);  // throws for unknown

// True when the tree has section.key.
bool has_field(const std::string& section, const std::string& key);

// "training.steps" -> {"training", "steps"}; throws naming `where` when there is no dot.
std::pair<std::string, std::string> split_dotted_key(const std::string& dotted_key,
                                                     const std::string& where);

// True when section.key is a boolean field (those also take a bare `--section.key`).
// Throws, naming `where` and listing the accepted names, when the key does not exist.
bool is_bool_field(const std::string& section, const std::string& key, const std::string& where);

// Sets section.key from a command-line value (see field_values.h for the syntax of each
// type). `where` names the source in error messages, e.g. "--training.steps".
void set_field_from_string(TrainerConfig& config, const std::string& section,
                           const std::string& key, const std::string& text,
                           const std::string& where);

// The whole tree as TOML: "[section]" then "key = value" lines, in visit order; with
// `with_descriptions`, each field's one-line description from visit() as a "# ..." comment line
// above it, and the test and benchmark hooks (descriptions starting "test hook" or "benchmark
// hook") left out while at their defaults. Loading the text back as a config file reproduces
// `config` exactly.
std::string to_toml(const TrainerConfig& config, bool with_descriptions = false);

// The description visit() gives section.key ("" when there is none or no such field).
std::string field_description(const std::string& section, const std::string& key);

// Errors for names that are not in the tree; they list the accepted names and suggest the
// closest one.
[[noreturn]] void fail_unknown_section(const std::string& section, const std::string& where);
[[noreturn]] void fail_unknown_key(const std::string& section, const std::string& key,
                                   const std::string& where);

// Calls f(field) with a reference to section.key of `config` (f must accept every field
// type); throws through fail_unknown_section/fail_unknown_key when there is no such field.
template <class F>
void with_field(TrainerConfig& config, const std::string& section, const std::string& key,
                const std::string& where, F&& f) {
  bool section_found = false;
  bool field_found = false;
  auto on_section = [&](const char* section_name, auto& fields) {
    if (section_found || section != section_name) return;
    section_found = true;
    auto on_field = [&](const char* field_name, auto& value, const char* = "") {
      if (field_found || key != field_name) return;
      field_found = true;
      f(value);
    };
    fields.visit(on_field);
  };
  config.visit_sections(on_section);
  if (!section_found) fail_unknown_section(section, where);
  if (!field_found) fail_unknown_key(section, key, where);
}

}  // namespace titan::config
