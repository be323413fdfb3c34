#include "titan/train/state/checkpoint_manager.h"

#include <ATen/core/grad_mode.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>

#include "titan/checkpoint/checkpoint_names.h"
#include "titan/checkpoint/dcp_reader.h"
#include "titan/common/box_tensor.h"
#include "titan/common/error.h"
#include "titan/common/strings.h"
#include "titan/train/state/resume_config_check.h"
#include "titan/train/state/torchtitan_part_reader.h"

namespace fs = std::filesystem;

namespace titan::train {
namespace {

bool excluded(const std::vector<std::string>& exclude, const std::string& part) {
  return std::find(exclude.begin(), exclude.end(), part) != exclude.end();
}

void check_part_names(const std::vector<std::string>& names) {
  for (const auto& part : names) {
    TITAN_CHECK(
        std::find(checkpoint::checkpoint_parts().begin(), checkpoint::checkpoint_parts().end(),
                  part) != checkpoint::checkpoint_parts().end(),
        "checkpoint.exclude_from_loading: unknown part '", part,
        "'; accepted: ", join(checkpoint::checkpoint_parts()));
  }
}

// The parts a load leaves out: every part but the model's when `model_only`, else
// checkpoint.exclude_from_loading.
std::vector<std::string> not_loaded(const config::TrainerConfig& cfg, bool model_only) {
  if (!model_only) return cfg.checkpoint.exclude_from_loading;
  std::vector<std::string> exclude;
  for (const std::string& part : checkpoint::checkpoint_parts())
    if (part != checkpoint::kModelPart) exclude.push_back(part);
  return exclude;
}

// The pieces of a part's tensors this process writes, recorded as boxes where they are pieces.
checkpoint::CheckpointPart to_pieces(const PartState& state,
                                     const checkpoint::TensorLayout& layout) {
  checkpoint::CheckpointPart out;
  out.state = state.state;
  for (const auto& [name, local] : state.tensors) {
    const checkpoint::LocalPiece piece = layout.piece(name, local);
    if (!piece.writer) continue;
    if (piece.whole) {
      out.tensors.emplace_back(name, local);
      continue;
    }
    out.tensors.emplace_back(name, real_part(local, piece.box));
    out.pieces[name] = {piece.global_shape, piece.box.offset};
  }
  return out;
}

// One part of a checkpoint folder, read through this rank's layout.
class LayoutPartReader : public PartReader {
 public:
  LayoutPartReader(const checkpoint::CheckpointReader& reader, std::string part,
                   const checkpoint::TensorLayout& layout, std::string source)
      : reader_(reader), part_(std::move(part)), layout_(layout), source_(std::move(source)) {}

  const std::string& source() const override { return source_; }
  nlohmann::json state() const override { return reader_.state_of(part_); }
  std::vector<std::string> names() const override { return reader_.names(part_); }
  bool contains(const std::string& name) const override { return reader_.contains(part_, name); }
  std::vector<int64_t> global_shape(const std::string& name) const override {
    return reader_.global_shape(part_, name);
  }
  at::Tensor read(const std::string& name) const override { return reader_.read(part_, name); }

  void read_into(const std::string& name, at::Tensor& local) const override {
    const checkpoint::LocalPiece piece = layout_.piece(name, local);
    const std::vector<int64_t> saved = reader_.global_shape(part_, name);
    TITAN_CHECK(saved == piece.global_shape, source_, ": ", part_, " tensor '", name,
                "' has shape ", shape_to_string(saved), " but this run expects ",
                shape_to_string(piece.global_shape));
    at::NoGradGuard no_grad;
    if (piece.whole) {
      local.copy_(reader_.read_box(part_, name, piece.box));
      return;
    }
    local.zero_();  // the padding
    real_part(local, piece.box).copy_(reader_.read_box(part_, name, piece.box));
  }

 private:
  const checkpoint::CheckpointReader& reader_;
  std::string part_;
  const checkpoint::TensorLayout& layout_;
  std::string source_;
};

}  // namespace

std::vector<int64_t> torchtitan_steps(const std::string& folder) {
  std::vector<int64_t> steps;
  if (!fs::is_directory(folder)) return steps;
  for (const auto& entry : fs::directory_iterator(folder)) {
    const auto step = checkpoint::parse_step_folder_name(entry.path().filename().string());
    if (step && entry.is_directory() && checkpoint::is_dcp_checkpoint(entry.path().string()))
      steps.push_back(*step);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

checkpoint::SaveCoordination save_coordination(DistributedSetup& dist) {
  checkpoint::SaveCoordination c;
  c.rank = dist.rank();
  c.world_size = dist.env.world_size;
  if (c.world_size == 1) return c;
  distributed::World& world = *dist.world;
  if (c.rank == 0) {
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    world.store_set(
        "titan/checkpoint_run_id",
        std::to_string(::getpid()) + "-" +
            std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(now).count()));
  }
  c.run_id = world.store_get("titan/checkpoint_run_id");
  c.publish = [&world](const std::string& key, const std::string& value) {
    world.store_set(key, value);
  };
  c.collect = [&world](const std::string& key) { return world.store_wait_and_get(key); };
  return c;
}

CheckpointManager::CheckpointManager(const config::TrainerConfig& cfg, StatefulParts parts,
                                     const checkpoint::TensorLayout& layout,
                                     checkpoint::SaveCoordination coordination)
    : cfg_(cfg),
      parts_(std::move(parts)),
      layout_(layout),
      coordination_(std::move(coordination)),
      store_((fs::path(cfg.job.dump_folder) / cfg.checkpoint.folder).string(),
             cfg.checkpoint.keep_latest_k, cfg.debug.checkpoint_write_delay_ms) {
  for (const auto& [name, part] : parts_) {
    TITAN_CHECK(part != nullptr, "checkpoint part '", name, "' is null");
    check_part_names({name});
  }
  if (cfg.checkpoint.async_mode == "async")
    async_ = std::make_unique<checkpoint::AsyncCheckpointSaver>(store_);
}

CheckpointManager::~CheckpointManager() {
  try {
    finish();
  } catch (const std::exception& e) {
    // Reached only when training stopped for another error first; do not hide this one.
    std::cerr << "error: the background checkpoint save failed: " << e.what() << std::endl;
  }
}

std::optional<int64_t> CheckpointManager::resumable_step() const {
  const auto& ck = cfg_.checkpoint;
  if (!ck.enable) return std::nullopt;
  std::vector<int64_t> steps = store_.complete_steps();
  for (int64_t step : torchtitan_steps(store_.folder())) steps.push_back(step);
  std::sort(steps.begin(), steps.end());
  if (ck.load_step >= 0) {
    TITAN_CHECK(std::find(steps.begin(), steps.end(), ck.load_step) != steps.end(),
                "checkpoint.load_step ", ck.load_step, ": no complete checkpoint ",
                checkpoint::step_folder_name(ck.load_step), " in ", store_.folder());
    return ck.load_step;
  }
  if (steps.empty()) return std::nullopt;
  return steps.back();
}

bool CheckpointManager::is_torchtitan_step(int64_t step) const {
  return checkpoint::is_dcp_checkpoint(store_.step_dir(step));
}

void CheckpointManager::resume(int64_t step) {
  restore(store_.step_dir(step), cfg_.checkpoint.exclude_from_loading);
}

void CheckpointManager::load_from(const std::string& step_dir, bool model_only) {
  checkpoint::step_of_folder(step_dir);  // must be named step-N
  restore(step_dir, not_loaded(cfg_, model_only));
}

std::vector<std::string> CheckpointManager::restore_torchtitan(
    const checkpoint::TorchtitanCheckpointReader& reader, bool model_only) {
  const std::vector<std::string> exclude = not_loaded(cfg_, model_only);
  check_part_names(exclude);
  return restore_from_torchtitan(reader, parts_, layout_, exclude);
}

checkpoint::TrainingCheckpoint CheckpointManager::snapshot(int64_t step) const {
  checkpoint::TrainingCheckpoint c;
  c.step = step;
  c.mesh = layout_.mesh();
  for (const auto& [name, part] : parts_)
    c.parts.emplace_back(name, to_pieces(part->save(), layout_));
  // The resolved config, compared on resume (resume_config_check.h): manifest state.config.
  c.part("config").state = saved_config_text(cfg_);
  return c;
}

void CheckpointManager::restore(const std::string& step_dir,
                                const std::vector<std::string>& exclude) {
  check_part_names(exclude);
  const checkpoint::CheckpointReader reader(step_dir);
  for (const auto& [name, part] : parts_) {
    if (excluded(exclude, name)) continue;
    part->load(LayoutPartReader(reader, name, layout_, step_dir));
  }
}

void CheckpointManager::maybe_save(int64_t step, bool last) {
  if (!cfg_.checkpoint.enable) return;
  if (step % cfg_.checkpoint.interval != 0 && !last) return;
  if (async_) {
    async_->save(snapshot(step), coordination_);
  } else {
    store_.save(snapshot(step), coordination_);
  }
  if (layout_.coordinator()) {
    std::cout << "[titan] saved training checkpoint " << store_.step_dir(step)
              << (async_ ? " (in the background)" : "") << std::endl;
  }
}

void CheckpointManager::finish() {
  if (async_) async_->wait();
}

bool CheckpointManager::save_now(int64_t step) {
  if (!cfg_.checkpoint.enable || step < 1) return false;
  finish();
  store_.save(snapshot(step), coordination_);
  if (layout_.coordinator())
    std::cout << "[titan] saved training checkpoint " << store_.step_dir(step) << std::endl;
  return true;
}

}  // namespace titan::train
