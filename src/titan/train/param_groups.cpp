#include "titan/train/param_groups.h"

#include <fnmatch.h>

#include "titan/common/error.h"
#include "titan/config/validate.h"

namespace titan::train {

std::vector<ParamGroupRule> parse_param_group_rules(const std::vector<std::string>& entries) {
  std::vector<ParamGroupRule> rules;
  for (const std::string& entry : entries) {
    const config::ParamGroupEntry parsed = config::parse_param_group_entry(entry);
    rules.push_back({parsed.glob, parsed.weight_decay});
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
