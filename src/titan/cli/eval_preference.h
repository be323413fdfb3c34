// titan eval --objective dpo: the DPO loss and TRL's reward metrics of a model against a
// reference model on a preference file (docs/preference.md).
#pragma once

#include "titan/cli/flag_parser.h"

namespace titan::cli {

// The flags run_eval accepts besides its own.
const std::vector<std::string>& dpo_eval_flags();
int run_eval_dpo(const FlagParser& flags);

}  // namespace titan::cli
