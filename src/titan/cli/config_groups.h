// The config functions of a module grouped by what they are for (debug models, training,
// fine-tuning, LoRA, SFT, parallel layouts, fused kernels, `make train`), for `titan --help`:
// a newcomer sees which function to start from without reading every description.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "titan/config/config_registry.h"

namespace titan::cli {

// {group title, function names} in a fixed order of groups, functions in registration order;
// empty groups left out.
std::vector<std::pair<std::string, std::vector<std::string>>> config_groups(
    const config::ConfigRegistry& registry, const std::string& module);

}  // namespace titan::cli
