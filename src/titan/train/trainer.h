// The training loop: data -> model -> loss -> backward -> clip -> AdamW -> lr schedule ->
// metrics -> checkpoints, from a resolved TrainerConfig. Everything model-specific goes
// through the ModelSpec named by model.name.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "titan/config/trainer_config.h"

namespace titan::train {

struct TrainSummary {
  std::vector<double> losses;  // one per step run by this process
  int64_t last_step = 0;
  std::string hf_export_dir;       // empty unless checkpoint.last_save_in_hf
  std::string adapter_export_dir;  // LoRA's PEFT folder, empty unless exported
  std::string checkpoint_dir;      // the last training checkpoint, when checkpointing is on
  int stop_signal = 0;             // the signal that stopped the run early (SIGTERM, SIGINT), or 0
  int64_t skipped_steps = 0;       // steps skipped for a non-finite loss or gradient norm
};

// Runs the whole job described by `config`; throws titan::Error for bad input. `started`
// (optional) is called once the set-up has succeeded, before the first step: what a run
// writes into its dump folder is written from then on.
TrainSummary run_training(const config::TrainerConfig& config,
                          const std::function<void()>& started = {});

}  // namespace titan::train
