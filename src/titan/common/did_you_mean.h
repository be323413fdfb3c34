// " (did you mean \"steps\"?)" for a name that is not accepted but close to one that is: the
// hint every unknown-name error (config keys, sections, modules, config functions) appends.
// Header-only, so that the torch-free config room can use it.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

namespace titan {

// Levenshtein distance (insertions, deletions, substitutions).
inline size_t edit_distance(const std::string& a, const std::string& b) {
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

// The closest accepted name when it is close enough to be a likely typo (a third of the name's
// length, at least 2 edits), or a prefix of exactly one accepted name ("qwen" -> "qwen3"); "" when
// none is.
inline std::string closest_name(const std::string& name, const std::vector<std::string>& accepted) {
  std::string best;
  size_t best_distance = std::max<size_t>(2, name.size() / 3) + 1;
  for (const auto& candidate : accepted) {
    const size_t d = edit_distance(name, candidate);
    if (d < best_distance) {
      best_distance = d;
      best = candidate;
    }
  }
  if (!best.empty() || name.empty()) return best;
  std::vector<std::string> extensions;
  for (const auto& candidate : accepted)
    if (candidate.rfind(name, 0) == 0) extensions.push_back(candidate);
  return extensions.size() == 1 ? extensions.front() : "";
}

// " (did you mean \"NAME\"?)", or "" when no accepted name is close.
inline std::string did_you_mean(const std::string& name, const std::vector<std::string>& accepted) {
  const std::string best = closest_name(name, accepted);
  return best.empty() ? "" : " (did you mean \"" + best + "\"?)";
}

}  // namespace titan
