#include "titan/train/param_groups.h"

#include <fnmatch.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "titan/common/error.h"

namespace titan::train {

std::vector<ParamGroupRule> parse_param_group_rules(const std::vector<std::string>& entries) {
  std::vector<ParamGroupRule> rules;
  for (const std::string& entry : entries) {
    // The glob itself may contain '=' only inside brackets, which is unusual enough that the
    // last '=' separates the value.
    const size_t eq = entry.rfind('=');
    TITAN_CHECK(eq != std::string::npos && eq > 0 && eq + 1 < entry.size(),
                "optimizer.param_groups: malformed entry '", entry,
                "'; expected GLOB=WEIGHT_DECAY, e.g. '*norm*=0'");
    const std::string value = entry.substr(eq + 1);
    char* end = nullptr;
    errno = 0;
    const double weight_decay = std::strtod(value.c_str(), &end);
    TITAN_CHECK(errno == 0 && end == value.c_str() + value.size() && std::isfinite(weight_decay) &&
                    weight_decay >= 0,
                "optimizer.param_groups: entry '", entry, "' has weight decay '", value,
                "'; expected a non-negative number");
    rules.push_back({entry.substr(0, eq), weight_decay});
  }
  return rules;
}

bool glob_matches(const std::string& glob, const std::string& name) {
  // No FNM_PATHNAME / FNM_PERIOD: like Python's fnmatch, '*' matches '.' too.
  return fnmatch(glob.c_str(), name.c_str(), 0) == 0;
}

std::vector<ParamGroup> build_param_groups(const NamedTensors& params,
                                           const config::OptimizerConfig& config) {
  std::vector<ParamGroup> groups;
  if (config.param_groups.empty()) {
    groups.push_back({"dim>=2", config.weight_decay, {}});
    groups.push_back({"dim<2", 0.0, {}});
    for (size_t i = 0; i < params.size(); ++i)
      groups[params[i].second.dim() >= 2 ? 0 : 1].members.push_back(i);
    std::erase_if(groups, [](const ParamGroup& g) { return g.members.empty(); });
    return groups;
  }
  const std::vector<ParamGroupRule> rules = parse_param_group_rules(config.param_groups);
  for (size_t r = 0; r < rules.size(); ++r)
    groups.push_back({config.param_groups[r], rules[r].weight_decay, {}});
  for (size_t i = 0; i < params.size(); ++i) {
    size_t r = 0;
    while (r < rules.size() && !glob_matches(rules[r].glob, params[i].first)) ++r;
    TITAN_CHECK(r < rules.size(), "optimizer.param_groups: parameter '", params[i].first,
                "' matches no entry; add a catch-all such as '*=", config.weight_decay, "'");
    groups[r].members.push_back(i);
  }
  for (size_t r = 0; r < rules.size(); ++r)
    TITAN_CHECK(!groups[r].members.empty(), "optimizer.param_groups: entry '",
                config.param_groups[r], "' matches no parameter");
  return groups;
}

}  // namespace titan::train
