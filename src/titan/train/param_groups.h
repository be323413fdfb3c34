// Parameter groups for the optimizer: which weight decay each parameter gets.
//
// optimizer.param_groups lists "GLOB=WEIGHT_DECAY" entries matched against parameter names
// with fnmatch-style globs (*, ?, [...]), first match wins, like torchtitan's pattern list.
// With no entries, the Hugging Face Trainer's rule applies: weight decay on matrices
// (dim >= 2), none on vectors (norm weights, biases).
#pragma once

#include <ATen/ATen.h>

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "titan/common/named_tensors.h"
#include "titan/config/trainer_config.h"

namespace titan::train {

struct ParamGroupRule {
  std::string glob;
  double weight_decay = 0;
};

struct ParamGroup {
  std::string rule;  // the entry that formed it, or "dim>=2" / "dim<2" for the default rule
  double weight_decay = 0;
  std::vector<size_t> members;  // indices into the parameter list, in its order
};

// Parses "GLOB=WEIGHT_DECAY" entries; throws titan::Error naming a malformed entry.
std::vector<ParamGroupRule> parse_param_group_rules(const std::vector<std::string>& entries);

// Fnmatch-style glob match over the whole name ('*' also crosses '.').
bool glob_matches(const std::string& glob, const std::string& name);

// Assigns every parameter to one group. With rules, a parameter no rule matches, or a rule
// that matches no parameter, is an error naming it (as in torchtitan). Empty groups of the
// default rule are dropped.
std::vector<ParamGroup> build_param_groups(const NamedTensors& params,
                                           const config::OptimizerConfig& config);

}  // namespace titan::train
