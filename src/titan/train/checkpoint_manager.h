// The periodic training checkpoints of a job (<dump_folder>/<checkpoint.folder>/step-N):
// everything a resumed run needs to continue exactly (model, optimizer, lr scheduler position,
// data loader position, train state, RNG), written synchronously or in the background
// (checkpoint.async_mode), every checkpoint.interval steps and at the last one. Under data
// parallelism every rank writes the pieces it holds (the layout says which) and loads exactly
// the rows it needs, whatever the world size that saved them.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "titan/checkpoint/tensor_layout.h"
#include "titan/checkpoint/training_checkpoint.h"
#include "titan/config/trainer_config.h"
#include "titan/data/data_loader.h"
#include "titan/models/model_spec.h"
#include "titan/train/optimizer.h"

namespace titan::train {

class CheckpointManager {
 public:
  CheckpointManager(const config::TrainerConfig& cfg, const models::ModelSpec& spec,
                    models::Model& model, AdamW& optimizer, data::DataLoader& loader,
                    const checkpoint::TensorLayout& layout = checkpoint::whole_tensors(),
                    checkpoint::SaveCoordination coordination = {});
  // Waits for a background save; an error of it is reported on stderr (finish() throws it).
  ~CheckpointManager();
  CheckpointManager(const CheckpointManager&) = delete;
  CheckpointManager& operator=(const CheckpointManager&) = delete;

  // The step to resume from: checkpoint.load_step (which must exist) or the newest complete
  // checkpoint; nullopt when checkpointing is off or there is none.
  std::optional<int64_t> resumable_step() const;
  // Restores everything saved at `step` but the parts in checkpoint.exclude_from_loading.
  void resume(int64_t step);
  // Loads another job's training checkpoint folder (step-N) into this one: the model only when
  // `model_only`, else everything but checkpoint.exclude_from_loading.
  void load_from(const std::string& step_dir, bool model_only);

  void on_step_end(int64_t tokens) { tokens_seen_ += tokens; }
  // Saves when checkpointing is on and `step` is on the interval or `last`.
  void maybe_save(int64_t step, bool last);
  // Waits for a background save and rethrows its error.
  void finish();
  // Saves `step` now, synchronously, with the data loader at `loader_state` (where the failed
  // step began): the last checkpoint of a run that stops on a data error. Does nothing when
  // checkpointing is off; returns whether it saved.
  bool save_before_stopping(int64_t step, const nlohmann::json& loader_state);

  std::string step_dir(int64_t step) const { return store_.step_dir(step); }
  int64_t tokens_seen() const { return tokens_seen_; }

 private:
  checkpoint::TrainingCheckpoint snapshot(int64_t step,
                                          const nlohmann::json* loader_state = nullptr) const;
  // Loads the parts not in `exclude` from a complete checkpoint folder.
  void restore(const std::string& step_dir, const std::vector<std::string>& exclude);

  const config::TrainerConfig& cfg_;
  const models::ModelSpec& spec_;
  models::Model& model_;
  AdamW& optimizer_;
  data::DataLoader& loader_;
  const checkpoint::TensorLayout& layout_;
  checkpoint::SaveCoordination coordination_;
  checkpoint::CheckpointStore store_;
  std::unique_ptr<checkpoint::AsyncCheckpointSaver> async_;
  int64_t tokens_seen_ = 0;
};

}  // namespace titan::train
