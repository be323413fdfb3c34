// The trainer's Stateful parts (checkpoint_parts.h) restored from a torchtitan 0.3.0 checkpoint
// (docs/from_torchtitan.md, "Your checkpoints"), as titan's own are: each part reads through a
// PartReader, here one over the torchtitan checkpoint in titan's names and layouts
// (checkpoint/torchtitan_checkpoint.h), which fills this rank's box of every tensor.
//   model         the weights (the checkpoint was checked against the whole model first);
//   optimizer     AdamW's moments and steps (a full checkpoint);
//   train_state   torchtitan's train_state.step and ntokens_seen;
//   lr_scheduler  nothing to read: the step places the schedule (lr_scheduler.last_epoch is
//                 torchtitan's step count);
//   dataloader    torchtitan's data position, when this run reads the same rows the same way
//                 (DataLoader::load_torchtitan_position), else a note saying why not;
//   rng           torchtitan saves none: this run's generator stays as seeded.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "titan/checkpoint/tensor_layout.h"
#include "titan/checkpoint/torchtitan_checkpoint.h"
#include "titan/train/state/stateful.h"

namespace titan::train {

// Restores the named `parts` but those in `exclude` from `reader`. A model-only checkpoint
// (a seed checkpoint, last_save_model_only) restores the model alone. Returns what was not
// carried, one line each (for one warning).
std::vector<std::string> restore_from_torchtitan(
    const checkpoint::TorchtitanCheckpointReader& reader,
    const std::vector<std::pair<std::string, Stateful*>>& parts,
    const checkpoint::TensorLayout& layout, const std::vector<std::string>& exclude);

}  // namespace titan::train
