// A resumed run continues exactly only with the settings it was saved with. Every training
// checkpoint records the resolved config (state.config of its manifest, saved_config_text());
// on resume the settings that shape the optimisation are compared with it, and the ones that
// differ are printed in one warning line: the global batch (rows per optimizer step), seq_len,
// the data (dataset_path, packing, eos_token), training.steps, optimizer.name and lr, and the lr
// schedule. The run goes on with the new values. Before anything is restored, the checkpoint's
// model is checked to be the one this run builds (another architecture is one error saying
// so), and a checkpoint.initial_load_path the resumed run will not load is a warning.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

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

// The warning for a checkpoint.initial_load_path that resuming from `step_dir` leaves unloaded
// (none when it is the one the checkpoint's own run started from: the same job run again).
std::optional<std::string> ignored_initial_load(const config::TrainerConfig& now,
                                                const std::string& step_dir);

// Throws titan::Error naming `step_dir` when its model is not the one this run builds: another
// model.name, or a field of its Hugging Face config that shapes the tensors (hidden_size,
// num_experts, ...) differs from `hf_config`, this run's model's.
void check_resumable_model(const nlohmann::json& hf_config, const std::string& name,
                           const std::string& step_dir);

// Prints the warnings (on `talk`, the rank that logs): the settings that differ, and the
// initial load the resumed run ignores.
void warn_on_resume_config_change(const config::TrainerConfig& now, int64_t global_batch,
                                  const std::string& step_dir, bool talk);

}  // namespace titan::train
