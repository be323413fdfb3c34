// The periodic training checkpoints of a job (<dump_folder>/<checkpoint.folder>/step-N): the
// named Stateful parts the trainer declares (stateful.h, checkpoint_parts.h), written
// synchronously or in the background (checkpoint.async_mode), every checkpoint.interval steps
// and at the last one. Under parallelism every rank writes the pieces it holds (the layout
// says which box of which tensor) and loads exactly the boxes it needs, whatever the layout
// that saved them (torchtitan's CheckpointManager over DCP). A torchtitan checkpoint in the
// folder is resumed from as well (torchtitan_part_reader.h).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "titan/checkpoint/tensor_layout.h"
#include "titan/checkpoint/torchtitan_checkpoint.h"
#include "titan/checkpoint/training_checkpoint.h"
#include "titan/config/trainer_config.h"
#include "titan/train/distributed_setup.h"
#include "titan/train/state/stateful.h"

namespace titan::train {

// How the ranks write one checkpoint together: through the store, into a folder named after
// this run (rank 0's process id and start time, shared through the store). A world of one
// needs nothing. A collective over the world (rank 0 publishes the name).
checkpoint::SaveCoordination save_coordination(DistributedSetup& dist);

// The parts a checkpoint holds, in save order, by name (checkpoint::checkpoint_parts()).
using StatefulParts = std::vector<std::pair<std::string, Stateful*>>;

// The steps of the torchtitan checkpoints in `folder` (step-N folders holding a DCP
// .metadata), ascending: a job resumes from them as from its own (torchtitan_part_reader.h).
std::vector<int64_t> torchtitan_steps(const std::string& folder);

class CheckpointManager {
 public:
  CheckpointManager(const config::TrainerConfig& cfg, StatefulParts parts,
                    const checkpoint::TensorLayout& layout = checkpoint::whole_tensors(),
                    checkpoint::SaveCoordination coordination = {});
  // Waits for a background save; an error of it is reported on stderr (finish() throws it).
  ~CheckpointManager();
  CheckpointManager(const CheckpointManager&) = delete;
  CheckpointManager& operator=(const CheckpointManager&) = delete;

  // The step to resume from: checkpoint.load_step (which must exist) or the newest complete
  // checkpoint, titan's or torchtitan's; nullopt when checkpointing is off or there is none.
  std::optional<int64_t> resumable_step() const;
  // Whether `step` is a torchtitan checkpoint (restored with restore_torchtitan).
  bool is_torchtitan_step(int64_t step) const;
  // Restores every part saved at `step` but those in checkpoint.exclude_from_loading.
  void resume(int64_t step);
  // Loads another job's training checkpoint folder (step-N) into this one: the model only when
  // `model_only`, else everything but checkpoint.exclude_from_loading.
  void load_from(const std::string& step_dir, bool model_only);
  // Restores from a torchtitan checkpoint (already checked against the model): the model
  // only when `model_only`, else everything but checkpoint.exclude_from_loading. Returns what
  // was not carried, one line each.
  std::vector<std::string> restore_torchtitan(const checkpoint::TorchtitanCheckpointReader& reader,
                                              bool model_only);

  // Saves when checkpointing is on and `step` is on the interval or `last`.
  void maybe_save(int64_t step, bool last);
  // Waits for a background save and rethrows its error.
  void finish();
  // Saves `step` now, synchronously (the last checkpoint of a run that stops on a data
  // error). Does nothing when checkpointing is off; returns whether it saved.
  bool save_now(int64_t step);

  std::string step_dir(int64_t step) const { return store_.step_dir(step); }

 private:
  checkpoint::TrainingCheckpoint snapshot(int64_t step) const;
  // Loads the parts not in `exclude` from a complete checkpoint folder.
  void restore(const std::string& step_dir, const std::vector<std::string>& exclude);

  const config::TrainerConfig& cfg_;
  StatefulParts parts_;
  const checkpoint::TensorLayout& layout_;
  checkpoint::SaveCoordination coordination_;
  checkpoint::CheckpointStore store_;
  std::unique_ptr<checkpoint::AsyncCheckpointSaver> async_;
};

}  // namespace titan::train
