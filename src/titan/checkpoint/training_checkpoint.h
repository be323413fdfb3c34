// Training checkpoints: everything a resumed run needs to continue exactly (model,
// optimizer state, lr scheduler, data loader position, train state, RNG), in
// <folder>/step-N/ as safetensors files keyed by parameter name plus a JSON manifest.
//
// The manifest records, for every tensor, its global shape and the slice this file holds,
// so that a run with another world size can reshard it. A save goes to a temporary folder,
// is fsynced, then renamed into place: a crash during a save never touches the previous
// checkpoints, and only folders with a manifest count as checkpoints.
#pragma once

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "titan/common/named_tensors.h"

namespace titan::checkpoint {

struct TrainingCheckpoint {
  int64_t step = 0;
  NamedTensors model;      // native parameter (and buffer) names
  NamedTensors optimizer;  // optimizer state, e.g. "<param>.exp_avg"
  NamedTensors rng;        // generator states as uint8 tensors
  // {"train_state": {...}, "lr_scheduler": {...}, "dataloader": {...}}
  nlohmann::json state = nlohmann::json::object();
};

// The parts exclude_from_loading may name.
inline const std::vector<std::string>& checkpoint_parts() {
  static const std::vector<std::string> parts = {"model",      "optimizer",   "lr_scheduler",
                                                 "dataloader", "train_state", "rng"};
  return parts;
}

class CheckpointStore {
 public:
  // keep_latest_k == 0 keeps every checkpoint.
  CheckpointStore(std::string folder, int64_t keep_latest_k, int64_t write_delay_ms = 0);

  const std::string& folder() const { return folder_; }
  // Steps of the complete checkpoints in the folder, ascending.
  std::vector<int64_t> complete_steps() const;
  std::string step_dir(int64_t step) const;

  // Writes the checkpoint (tensors are copied to the CPU as they are written), then prunes
  // old ones (never the newest complete one). A filesystem failure is a titan::Error naming
  // the checkpoint; the previous checkpoints are untouched.
  void save(const TrainingCheckpoint& ckpt) const;
  // Loads step `step`; parts named in `exclude` come back empty. Throws naming the folder.
  TrainingCheckpoint load(int64_t step, const std::vector<std::string>& exclude = {}) const;

 private:
  void write(const TrainingCheckpoint& ckpt) const;
  void prune() const;
  std::string folder_;
  int64_t keep_latest_k_;
  int64_t write_delay_ms_;
};

// Saves in a background thread after a CPU copy of the state has been taken, so training does
// not wait for the disk. One save at a time: a new save waits for the previous one. An error of
// a save comes back from the next save() or wait(); one nobody waited for is printed when the
// saver is destroyed.
class AsyncCheckpointSaver {
 public:
  explicit AsyncCheckpointSaver(const CheckpointStore& store) : store_(store) {}
  ~AsyncCheckpointSaver();
  AsyncCheckpointSaver(const AsyncCheckpointSaver&) = delete;
  AsyncCheckpointSaver& operator=(const AsyncCheckpointSaver&) = delete;

  void save(TrainingCheckpoint ckpt);  // copies tensors to the CPU before returning
  void wait();                         // rethrows an error of the background save

 private:
  const CheckpointStore& store_;
  std::thread worker_;
  std::exception_ptr error_;
};

// A copy of every tensor on the CPU (detached), so the original may keep changing.
NamedTensors cpu_copy(const NamedTensors& tensors);

}  // namespace titan::checkpoint
