// What a job starts from, in torchtitan's order:
//   1. resume: checkpointing is on and this job has a complete training checkpoint, titan's
//      or torchtitan's (a DCP step-N; with checkpointing off such a step is one error, never
//      passed over);
//   2. an initial load of weights from checkpoint.initial_load_path (default: the
//      model.hf_assets_path when checkpoint.initial_load_in_hf): a Hugging Face directory,
//      another job's training checkpoint folder (step-N), or a torchtitan checkpoint;
//   3. the model as built (fresh, seeded initialisation).
// The log says which happened.
#pragma once

#include <cstdint>
#include <string>

#include "titan/checkpoint/tensor_layout.h"
#include "titan/config/trainer_config.h"
#include "titan/models/model_spec.h"
#include "titan/train/state/checkpoint_manager.h"

namespace titan::train {

// The folder the initial weights come from: checkpoint.initial_load_path, else
// model.hf_assets_path when checkpoint.initial_load_in_hf; "" when there is no initial load.
// (LoRA's converter reads its base from the same place, model_converters.h.)
std::string initial_load_path(const config::TrainerConfig& cfg);

// Whether the model's weights will come from a checkpoint or a Hugging Face folder (a resume
// or an initial load that reads the model), rather than from its initialisation: the trainer
// then gives the parameters storage without initialising them (models/materialize.h).
bool model_weights_are_loaded(const config::TrainerConfig& cfg);

// Returns the last completed step (0 unless resuming).
// `layout` says which rows of each parameter this rank holds (data parallelism). With
// `base_loaded` (LoRA: model_converters.h loaded the base before parallelize) only a resume
// loads anything.
int64_t load_initial_state(const config::TrainerConfig& cfg, const models::ModelSpec& spec,
                           models::ModelTensors& model, CheckpointManager& checkpoints,
                           const checkpoint::TensorLayout& layout, bool base_loaded = false);

}  // namespace titan::train
