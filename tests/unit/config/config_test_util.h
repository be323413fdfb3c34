// Helpers shared by the config tests: a flat, comparable view of a whole TrainerConfig and a
// way to capture the message of a titan::Error.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "titan/common/error.h"
#include "titan/config/trainer_config.h"

namespace titan::config::testing {

using FieldValue =
    std::variant<int64_t, double, bool, std::string, std::vector<std::string>, std::vector<double>>;
using FlatConfig = std::vector<std::pair<std::string, FieldValue>>;

// Every field as ("section.key", value), in visit order.
inline FlatConfig flatten(TrainerConfig config) {
  FlatConfig flat;
  auto on_section = [&](const char* section, auto& fields) {
    auto on_field = [&](const char* key, auto& value, const char* = "") {
      flat.emplace_back(std::string(section) + "." + key, FieldValue(value));
    };
    fields.visit(on_field);
  };
  config.visit_sections(on_section);
  return flat;
}

// The message of the titan::Error that f throws, or "<no error>".
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const titan::Error& e) {
    return e.what();
  }
  return "<no error>";
}

}  // namespace titan::config::testing

#define EXPECT_CONTAINS(text, part)                          \
  EXPECT_NE(std::string(text).find(part), std::string::npos) \
      << "expected \"" << (part) << "\" in: " << (text)
