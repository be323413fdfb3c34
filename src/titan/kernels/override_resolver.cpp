#include "titan/kernels/override_resolver.h"

#include <fnmatch.h>

#include <algorithm>
#include <charconv>
#include <iostream>
#include <map>

#include "titan/common/error.h"
#include "titan/common/strings.h"

namespace titan::kernels {
namespace {

std::string dtype_name(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat:
      return "float32";
    case at::kBFloat16:
      return "bfloat16";
    case at::kHalf:
      return "float16";
    case at::kDouble:
      return "float64";
    default:
      return c10::toString(dtype);
  }
}

// "layers.7.attention_norm" -> {"layers.", 7, ".attention_norm"}; false for paths without a
// number component.
bool split_numbered(const std::string& path, std::string& prefix, int64_t& number,
                    std::string& suffix) {
  size_t start = 0;
  while (start < path.size()) {
    const size_t end = path.find('.', start);
    const std::string part = path.substr(start, end == std::string::npos ? end : end - start);
    const char* first = part.data();
    const char* last = first + part.size();
    const auto [ptr, ec] = std::from_chars(first, last, number);
    if (!part.empty() && part[0] != '-' && ec == std::errc() && ptr == last) {
      prefix = path.substr(0, start);
      suffix = end == std::string::npos ? "" : path.substr(end);
      return true;
    }
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return false;
}

// "0..3,5" for {0, 1, 2, 3, 5}.
std::string number_ranges(const std::vector<int64_t>& numbers) {
  std::string out;
  for (size_t i = 0; i < numbers.size();) {
    size_t j = i;
    while (j + 1 < numbers.size() && numbers[j + 1] == numbers[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(numbers[i]);
    if (j > i) out += ".." + std::to_string(numbers[j]);
    i = j + 1;
  }
  return out;
}

// Paths in model order, with runs of numbered siblings written once: three or more of
// layers.N.ffn_norm become "layers.{0..27}.ffn_norm".
std::string compact_paths(const std::vector<std::string>& paths) {
  struct Group {
    std::string prefix, suffix;
    std::vector<int64_t> numbers;
    std::vector<std::string> paths;
  };
  std::vector<Group> groups;
  for (const std::string& path : paths) {
    std::string prefix, suffix;
    int64_t number = 0;
    if (!split_numbered(path, prefix, number, suffix)) {
      groups.push_back({path, "", {}, {path}});
      continue;
    }
    auto it = std::find_if(groups.begin(), groups.end(), [&](const Group& g) {
      return !g.numbers.empty() && g.prefix == prefix && g.suffix == suffix;
    });
    if (it == groups.end()) {
      groups.push_back({prefix, suffix, {number}, {path}});
    } else {
      it->numbers.push_back(number);
      it->paths.push_back(path);
    }
  }
  // In model order: a compacted group where its first path was, other paths where they were.
  std::vector<std::string> parts;
  std::vector<bool> emitted(groups.size(), false);
  for (const std::string& path : paths) {
    for (size_t i = 0; i < groups.size(); ++i) {
      const Group& g = groups[i];
      if (std::find(g.paths.begin(), g.paths.end(), path) == g.paths.end()) continue;
      if (g.numbers.size() < 3) {
        parts.push_back(path);
      } else if (!emitted[i]) {
        parts.push_back(g.prefix + "{" + number_ranges(g.numbers) + "}" + g.suffix);
        emitted[i] = true;
      }
      break;
    }
  }
  return join(parts);
}

}  // namespace

OverrideEntry parse_override_entry(const std::string& text) {
  const std::string where = "override.imports entry '" + text + "'";
  const size_t equals = text.find('=');
  TITAN_CHECK(equals != std::string::npos && equals > 0, where,
              ": expected OP=IMPL or OP=IMPL@GLOB, e.g. moe_experts=fused@layers.*.moe");
  OverrideEntry entry;
  entry.text = text;
  entry.op = op_from_name(text.substr(0, equals), where);
  std::string rest = text.substr(equals + 1);
  const size_t at = rest.find('@');
  if (at != std::string::npos) {
    entry.glob = rest.substr(at + 1);
    rest = rest.substr(0, at);
    TITAN_CHECK(!entry.glob.empty(), where, ": the module glob after '@' is empty");
  }
  TITAN_CHECK(!rest.empty(), where, ": no implementation after '='");
  entry.implementation = rest;
  return entry;
}

bool module_path_matches(const std::string& glob, const std::string& path) {
  // Without FNM_PATHNAME or FNM_PERIOD, '*' matches every character, dots included.
  return fnmatch(glob.c_str(), path.c_str(), 0) == 0;
}

OverrideResolver::OverrideResolver() : registry_(&kernel_registry()) { settings_.defaults = false; }

OverrideResolver::OverrideResolver(OverrideSettings settings, const KernelRegistry& registry)
    : registry_(&registry), settings_(std::move(settings)) {
  for (const std::string& text : settings_.imports) {
    OverrideEntry entry = parse_override_entry(text);
    if (!registry_->has(entry.op, entry.implementation)) {
      fail("override.imports entry '", text, "': unknown ", op_name(entry.op), " implementation '",
           entry.implementation, "'; known: ", join(registry_->names(entry.op)),
           " (override.libraries can add more)");
    }
    entries_.push_back(std::move(entry));
  }
  matches_.assign(entries_.size(), 0);
}

const Implementation& OverrideResolver::resolve(Op op, const std::string& path) {
  try {
    return resolve_unchecked(op, path);
  } catch (const OverrideError&) {
    throw;
  } catch (const Error& e) {
    throw OverrideError(e.what());
  }
}

const Implementation& OverrideResolver::resolve_unchecked(Op op, const std::string& path) {
  int claimed_by = -1;
  for (size_t i = 0; i < entries_.size(); ++i) {
    const OverrideEntry& entry = entries_[i];
    if (entry.op != op || !module_path_matches(entry.glob, path)) continue;
    if (claimed_by >= 0) {
      fail("override.imports entries '", entries_[claimed_by].text, "' and '", entry.text,
           "' both claim ", op_name(op), " at ", path, "; give them globs that do not overlap");
    }
    claimed_by = static_cast<int>(i);
  }
  const Implementation* chosen =
      settings_.defaults ? &registry_->default_for(op, settings_.device, settings_.dtype)
                         : &registry_->get(op, "reference");
  if (claimed_by >= 0) {
    chosen = &registry_->get(op, "reference");
    const OverrideEntry& entry = entries_[claimed_by];
    ++matches_[claimed_by];
    const Implementation& impl = registry_->get(op, entry.implementation);
    if (impl.supports(settings_.device, settings_.dtype)) {
      chosen = &impl;
    } else {
      const std::string device = c10::DeviceTypeName(settings_.device, /*lower_case=*/true);
      const std::string problem = "implementation '" + impl.name + "' of " +
                                  std::string(op_name(op)) + " does not support " + device +
                                  " with " + dtype_name(settings_.dtype) + " activations";
      TITAN_CHECK(settings_.fallback, "override.imports entry '", entry.text, "': ", problem,
                  " (set override.fallback true to use reference there instead)");
      // One warning per entry, at its first call site.
      if (matches_[claimed_by] == 1) {
        std::cerr << "[override] warning: " << problem << "; using reference for '" << entry.text
                  << "' (override.fallback)" << std::endl;
      }
    }
  }
  choices_.push_back({op, path, chosen->name, claimed_by >= 0});
  return *chosen;
}

void OverrideResolver::finish() const {
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (matches_[i] > 0) continue;
    throw OverrideError(unmatched_message(i));
  }
}

std::string OverrideResolver::unmatched_message(size_t i) const {
  std::vector<std::string> paths;
  for (const OverrideChoice& c : choices_)
    if (c.op == entries_[i].op && paths.size() < 4) paths.push_back(c.path);
  return "override.imports entry '" + entries_[i].text + "' matches no call site of " +
         std::string(op_name(entries_[i].op)) +
         (paths.empty() ? std::string(" (this model has none)")
                        : "; its module paths look like " + join(paths));
}

std::vector<std::string> OverrideResolver::summary(bool include_reference) const {
  // Grouped by op (in op order), then implementation, keeping the paths in model order.
  std::map<std::pair<int, std::string>, std::vector<std::string>> groups;
  for (const OverrideChoice& c : choices_) {
    if (!include_reference && (c.implementation == "reference" || !c.claimed)) continue;
    groups[{static_cast<int>(c.op), c.implementation}].push_back(c.path);
  }
  std::vector<std::string> lines;
  for (const auto& [key, paths] : groups) {
    lines.push_back(std::string(op_name(static_cast<Op>(key.first))) + ": " + compact_paths(paths) +
                    " -> " + key.second);
  }
  return lines;
}

}  // namespace titan::kernels
