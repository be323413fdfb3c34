// Preference records (data/preference_record.h) from arbitrary JSON: every object either makes
// a record or names its problem, never crashes; an extracted prompt is always a valid split.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "titan/data/preference_record.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const auto record = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!record.is_object()) return 0;
  const titan::data::ParsedPreference parsed = titan::data::parse_preference_record(record);
  if (parsed.record.has_value() == parsed.problem.has_value()) __builtin_trap();
  return 0;
}
