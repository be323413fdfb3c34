// Training checkpoints: everything a resumed run needs to continue exactly (model,
// optimizer state, lr scheduler, data loader position, train state, RNG), in
// <folder>/step-N/ as safetensors files keyed by parameter name plus a JSON manifest.
//
// Under data parallelism every rank writes its own pieces (<part>-rank<r>.safetensors: the rows
// of dim 0 it holds of each sharded tensor, and whole tensors from one replica), and the
// manifest records, for every tensor in every file, its global shape and the slice the file
// holds. A run with another world size reads back exactly the rows it needs (resharding).
//
// A save goes to a temporary folder, is fsynced, then renamed into place by rank 0 once every
// rank's files are there: a crash during a save never touches the previous checkpoints, and
// only folders with a manifest count as checkpoints.
#pragma once

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "titan/common/named_tensors.h"

namespace titan::checkpoint {

// For a tensor of which a file holds only some rows: the whole tensor's shape and the first
// row held (dim 0).
struct PieceOf {
  std::vector<int64_t> global_shape;
  int64_t row_begin = 0;
};

struct TrainingCheckpoint {
  int64_t step = 0;
  NamedTensors model;      // native parameter (and buffer) names
  NamedTensors optimizer;  // optimizer state, e.g. "<param>.exp_avg"
  NamedTensors rng;        // generator states as uint8 tensors
  // Tensors above that are pieces, by name; the others are whole.
  std::map<std::string, PieceOf> pieces;
  // {"train_state": {...}, "lr_scheduler": {...}, "dataloader": {...}}: written by rank 0.
  nlohmann::json state = nlohmann::json::object();
};

// The parts exclude_from_loading may name.
inline const std::vector<std::string>& checkpoint_parts() {
  static const std::vector<std::string> parts = {"model",      "optimizer",   "lr_scheduler",
                                                 "dataloader", "train_state", "rng"};
  return parts;
}

// How the ranks of a job write one checkpoint together, through the rendezvous store.
struct SaveCoordination {
  int64_t rank = 0;
  int64_t world_size = 1;
  std::string run_id;  // the same on every rank: names the shared temporary folder
  std::function<void(const std::string& key, const std::string& value)> publish;
  std::function<std::string(const std::string& key)> collect;  // waits for the key
};

// A complete checkpoint folder, opened for reading: its manifest, and tensors assembled from
// whichever files hold their rows. Throws titan::Error naming the folder or file.
class CheckpointReader {
 public:
  explicit CheckpointReader(const std::string& step_dir);
  ~CheckpointReader();

  int64_t step() const { return step_; }
  const nlohmann::json& state() const { return state_; }
  // The tensor names of a part ("model", "optimizer", "rng"), in save order.
  std::vector<std::string> names(const std::string& part) const;
  bool contains(const std::string& part, const std::string& name) const;
  std::vector<int64_t> global_shape(const std::string& part, const std::string& name) const;
  // Rows [begin, end) of dim 0 (a 0-dim tensor: begin 0, end 1), from every file that holds
  // some of them; throws when a row is in none.
  at::Tensor read_rows(const std::string& part, const std::string& name, int64_t begin,
                       int64_t end) const;
  at::Tensor read(const std::string& part, const std::string& name) const;

 private:
  struct Piece;
  std::string dir_;
  int64_t step_ = 0;
  nlohmann::json state_;
  std::map<std::string, std::vector<std::string>> order_;  // part -> names
  std::map<std::pair<std::string, std::string>, std::vector<Piece>> pieces_;
  struct Files;
  std::unique_ptr<Files> files_;
};

class CheckpointStore {
 public:
  // keep_latest_k == 0 keeps every checkpoint.
  CheckpointStore(std::string folder, int64_t keep_latest_k, int64_t write_delay_ms = 0);

  const std::string& folder() const { return folder_; }
  // Steps of the complete checkpoints in the folder, ascending.
  std::vector<int64_t> complete_steps() const;
  std::string step_dir(int64_t step) const;

  // Writes this process's part of the checkpoint (tensors are copied to the CPU as they are
  // written); with several ranks, rank 0 then waits for the others' files, writes the
  // manifest, renames the folder into place and prunes old checkpoints (never the newest
  // complete one). A filesystem failure is a titan::Error naming the checkpoint; the previous
  // checkpoints are untouched.
  void save(const TrainingCheckpoint& ckpt, const SaveCoordination& coordination = {}) const;
  // Loads step `step` with every tensor whole; parts named in `exclude` come back empty.
  TrainingCheckpoint load(int64_t step, const std::vector<std::string>& exclude = {}) const;

 private:
  void write(const TrainingCheckpoint& ckpt, const SaveCoordination& coordination) const;
  void prune(const std::string& keep_staging_suffix) const;
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

  // Copies tensors to the CPU before returning.
  void save(TrainingCheckpoint ckpt, SaveCoordination coordination = {});
  void wait();  // rethrows an error of the background save

 private:
  const CheckpointStore& store_;
  std::thread worker_;
  std::exception_ptr error_;
};

// A copy of every tensor on the CPU (detached), so the original may keep changing.
NamedTensors cpu_copy(const NamedTensors& tensors);

}  // namespace titan::checkpoint
