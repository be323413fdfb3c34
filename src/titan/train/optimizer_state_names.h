// The names of AdamW's per-parameter state, written in this one place: "<param>.exp_avg",
// "<param>.exp_avg_sq" (the moments, laid out like their parameter) and "<param>.step" (a
// float32 scalar), as torch.optim.AdamW's state_dict names them.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace titan::train::optimizer_state {

inline constexpr const char* kExpAvg = "exp_avg";
inline constexpr const char* kExpAvgSq = "exp_avg_sq";
inline constexpr const char* kStep = "step";

// Every field, and the moments alone.
inline const std::vector<std::string>& fields() {
  static const std::vector<std::string> all = {kExpAvg, kExpAvgSq, kStep};
  return all;
}
inline bool is_moment(const std::string& field) { return field == kExpAvg || field == kExpAvgSq; }

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
