// A resumed run continues exactly only with the settings it was saved with. Every training
// checkpoint records the resolved config (state.config of its manifest, saved_config_text());
// on resume the settings that shape the optimisation are compared with it, and the ones that
// differ are printed in one warning line: the global batch (rows per optimizer step), seq_len,
// training.steps and the lr schedule. The run goes on with the new values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "titan/config/trainer_config.h"

namespace titan::train {

// What a checkpoint stores of the config: its TOML text.
std::string saved_config_text(const config::TrainerConfig& cfg);

// "training.steps 20 -> 40" for every compared setting that differs between the config the
// checkpoint in `step_dir` was saved with and `now`; `global_batch` is this run's rows per
// optimizer step over all ranks. Empty when nothing differs or the checkpoint holds no config
// (one written before titan recorded it); one line saying so when its config cannot be read.
std::vector<std::string> resume_config_differences(const config::TrainerConfig& now,
                                                   int64_t global_batch,
                                                   const std::string& step_dir);

// Prints the warning when something differs (on `talk`, the rank that logs).
void warn_on_resume_config_change(const config::TrainerConfig& now, int64_t global_batch,
                                  const std::string& step_dir, bool talk);

}  // namespace titan::train
