// Training checkpoints: everything a resumed run needs to continue exactly (model,
// optimizer state, lr scheduler, data loader position, train state, RNG), in
// <folder>/step-N/ as safetensors files keyed by parameter name plus a JSON manifest.
//
// A checkpoint is a list of named parts (train/state/stateful.h): each part's tensors go to
// <part>.safetensors, or with several ranks <part>-rank<r>.safetensors holding the piece of each
// tensor that rank writes (its box of a sharded tensor, whole tensors from one replica), and
// its JSON state into the manifest. The manifest records, for every tensor in every file, its
// global shape and the box the file holds ([begin, end) per dimension, DCP's chunks), plus the
// mesh it was saved under. A run with any other layout reads back exactly the boxes it needs
// (resharding).
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
#include "titan/common/placement.h"

namespace titan::checkpoint {

// For a tensor of which a file holds a piece: the whole tensor's shape and where the piece
// starts in it, per dimension (the piece's own shape gives its lengths): an N-d box.
struct PieceOf {
  std::vector<int64_t> global_shape;
  std::vector<int64_t> offset;
};

// One named part of a checkpoint (a Stateful component's state, train/state/stateful.h): tensors,
// each whole or a piece, and a JSON object; either may be empty.
struct CheckpointPart {
  NamedTensors tensors;
  std::map<std::string, PieceOf> pieces;  // the tensors above that are pieces, by name
  nlohmann::json state;                   // null: none
};

struct TrainingCheckpoint {
  int64_t step = 0;
  // In save order: "model", "optimizer", "lr_scheduler", "dataloader", "train_state", "rng".
  std::vector<std::pair<std::string, CheckpointPart>> parts;
  // The mesh it was saved under ({"world_size": N, "dims": {"dp_shard": 2, ...}}); recorded in
  // the manifest for people and tools, not needed to load it.
  nlohmann::json mesh = nlohmann::json::object();

  // The part `name`, created (empty, at the end) when absent.
  CheckpointPart& part(const std::string& name);
  // nullptr when absent.
  const CheckpointPart* find(const std::string& name) const;
};

// The parts of a training checkpoint (the trainer's Stateful components), named here only.
inline constexpr const char* kModelPart = "model";
inline constexpr const char* kOptimizerPart = "optimizer";
inline constexpr const char* kLrSchedulerPart = "lr_scheduler";
inline constexpr const char* kDataLoaderPart = "dataloader";
inline constexpr const char* kTrainStatePart = "train_state";
inline constexpr const char* kRngPart = "rng";
// DPO's precomputed reference log-probabilities (dpo.precompute_reference).
inline constexpr const char* kDpoReferencePart = "dpo_reference";
// All of them, in save order (what exclude_from_loading may name).
inline const std::vector<std::string>& checkpoint_parts() {
  static const std::vector<std::string> parts = {
      kModelPart,      kOptimizerPart, kLrSchedulerPart, kDataLoaderPart,
      kTrainStatePart, kRngPart,       kDpoReferencePart};
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

// A complete checkpoint folder, opened for reading: its manifest, and tensors (or any box of
// them) assembled from whichever files hold the entries. Reads checkpoints of format version 1
// (pieces split on dim 0 only) and 2. Throws titan::Error naming the folder or file.
class CheckpointReader {
 public:
  explicit CheckpointReader(const std::string& step_dir);
  ~CheckpointReader();

  int64_t step() const { return step_; }
  // {"<part>": <its JSON state>, ...}
  const nlohmann::json& state() const { return state_; }
  // The part's JSON state (null when it has none).
  nlohmann::json state_of(const std::string& part) const;
  const nlohmann::json& mesh() const { return mesh_; }
  // The tensor names of a part, in save order.
  std::vector<std::string> names(const std::string& part) const;
  bool contains(const std::string& part, const std::string& name) const;
  std::vector<int64_t> global_shape(const std::string& part, const std::string& name) const;
  // The entries of `box` (global coordinates), from every file that holds some of them;
  // throws naming the tensor when some are in none.
  at::Tensor read_box(const std::string& part, const std::string& name, const Box& box) const;
  at::Tensor read(const std::string& part, const std::string& name) const;

 private:
  struct Piece;
  std::string dir_;
  int64_t step_ = 0;
  nlohmann::json state_;
  nlohmann::json mesh_;
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
