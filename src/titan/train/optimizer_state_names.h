// The names of the optimizer's per-parameter state, written in this one place: "<param>.step"
// (a float32 scalar), and either float32 moments, "<param>.exp_avg" and "<param>.exp_avg_sq"
// (laid out like their parameter), as torch.optim.AdamW's state_dict names them, or AdamW8bit's
// 8-bit moments (docs/optimizers.md): "<param>.exp_avg_codes" and "<param>.exp_avg_sq_codes"
// (uint8, laid out like the parameter) with "<param>.exp_avg_absmax" and
// "<param>.exp_avg_sq_absmax" (float32 per block of 256, laid out as train/block_layout.h says).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace titan::train::optimizer_state {

inline constexpr const char* kExpAvg = "exp_avg";
inline constexpr const char* kExpAvgSq = "exp_avg_sq";
inline constexpr const char* kStep = "step";
inline constexpr const char* kExpAvgCodes = "exp_avg_codes";
inline constexpr const char* kExpAvgAbsmax = "exp_avg_absmax";
inline constexpr const char* kExpAvgSqCodes = "exp_avg_sq_codes";
inline constexpr const char* kExpAvgSqAbsmax = "exp_avg_sq_absmax";

// Every field.
inline const std::vector<std::string>& fields() {
  static const std::vector<std::string> all = {
      kExpAvg, kExpAvgSq, kStep, kExpAvgCodes, kExpAvgAbsmax, kExpAvgSqCodes, kExpAvgSqAbsmax};
  return all;
}
// The float32 moments.
inline bool is_moment(const std::string& field) { return field == kExpAvg || field == kExpAvgSq; }
// The 8-bit moments' codes, laid out like the parameter as the float32 moments are.
inline bool is_codes(const std::string& field) {
  return field == kExpAvgCodes || field == kExpAvgSqCodes;
}
inline bool is_absmax(const std::string& field) {
  return field == kExpAvgAbsmax || field == kExpAvgSqAbsmax;
}
// The moment an 8-bit field belongs to ("exp_avg" or "exp_avg_sq"), else the field itself.
inline std::string moment_of(const std::string& field) {
  if (field == kExpAvgCodes || field == kExpAvgAbsmax) return kExpAvg;
  if (field == kExpAvgSqCodes || field == kExpAvgSqAbsmax) return kExpAvgSq;
  return field;
}

inline std::string key(const std::string& param, const std::string& field) {
  return param + "." + field;
}

struct Key {
  std::string param, field;
};
// "<param>.<field>" for a known field; nullopt for any other name.
inline std::optional<Key> parse(const std::string& key) {
  const size_t dot = key.rfind('.');
  if (dot == std::string::npos) return std::nullopt;
  Key k{key.substr(0, dot), key.substr(dot + 1)};
  for (const std::string& f : fields())
    if (k.field == f) return k;
  return std::nullopt;
}

}  // namespace titan::train::optimizer_state
