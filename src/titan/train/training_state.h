// The trainer's link to checkpoints: what to start from (resume > HF initial load > fresh
// init, in torchtitan's order), periodic training checkpoints (sync or async), and the final
// Hugging Face export.
#pragma once

#include <memory>
#include <string>

#include "titan/checkpoint/training_checkpoint.h"
#include "titan/config/trainer_config.h"
#include "titan/data/data_loader.h"
#include "titan/models/model_spec.h"
#include "titan/train/optimizer.h"

namespace titan::train {

class TrainingState {
 public:
  TrainingState(const config::TrainerConfig& cfg, const models::ModelSpec& spec,
                models::Model& model, AdamW& optimizer, data::DataLoader& loader);
  ~TrainingState();

  // Loads what the config asks for and returns the last completed step (0 when starting).
  int64_t load_initial();
  void on_step_end(int64_t step, int64_t tokens);
  void maybe_save(int64_t step, bool last);
  void finish();  // waits for a background save
  // Writes <dump_folder>/hf/step-N when checkpoint.last_save_in_hf; returns the folder or "".
  std::string export_hf_if_requested(int64_t step);

  int64_t tokens_seen() const { return tokens_seen_; }

 private:
  checkpoint::TrainingCheckpoint snapshot(int64_t step) const;
  void restore(const checkpoint::TrainingCheckpoint& ckpt);

  const config::TrainerConfig& cfg_;
  const models::ModelSpec& spec_;
  models::Model& model_;
  AdamW& optimizer_;
  data::DataLoader& loader_;
  checkpoint::CheckpointStore store_;
  std::unique_ptr<checkpoint::AsyncCheckpointSaver> async_;
  int64_t tokens_seen_ = 0;
};

// Copies `tensors` into the model's parameters/buffers by native name (no grad), checking
// that every name exists with the same shape; throws naming the first problem, before
// anything is modified.
void load_into_model(models::Model& model, const models::NamedTensors& tensors,
                     const std::string& source);

}  // namespace titan::train
