#include "titan/train/state/initial_load.h"

#include <algorithm>
#include <filesystem>
#include <iostream>

#include "titan/checkpoint/checkpoint_names.h"
#include "titan/checkpoint/dcp_reader.h"
#include "titan/checkpoint/hf_import.h"
#include "titan/checkpoint/torchtitan_import.h"
#include "titan/checkpoint/training_checkpoint.h"
#include "titan/common/error.h"
#include "titan/common/strings.h"
#include "titan/train/report/run_warnings.h"
#include "titan/train/state/resume_config_check.h"

namespace fs = std::filesystem;

namespace titan::train {

std::string initial_load_path(const config::TrainerConfig& cfg) {
  const auto& ck = cfg.checkpoint;
  if (ck.initial_load_path.empty() && ck.initial_load_in_hf) return cfg.model.hf_assets_path;
  return ck.initial_load_path;
}

bool model_weights_are_loaded(const config::TrainerConfig& cfg) {
  const auto& ck = cfg.checkpoint;
  const auto& exclude = ck.exclude_from_loading;
  const bool model_excluded =
      std::find(exclude.begin(), exclude.end(), checkpoint::kModelPart) != exclude.end();
  if (ck.enable) {
    const std::string folder = (fs::path(cfg.job.dump_folder) / ck.folder).string();
    const checkpoint::CheckpointStore store(folder, 0);
    if (ck.load_step >= 0 || !store.complete_steps().empty() || !torchtitan_steps(folder).empty())
      return !model_excluded;
  }
  if (initial_load_path(cfg).empty()) return false;
  return ck.initial_load_in_hf || ck.initial_load_model_only || !model_excluded;
}

namespace {

// "qwen3, flavor debugmodel": the model this run builds, for a torchtitan checkpoint's errors.
std::string describe_model(const config::TrainerConfig& cfg) {
  return cfg.model.name + ", flavor " + cfg.model.flavor;
}

void warn_not_carried(const std::string& dir, const std::vector<std::string>& notes, bool talk) {
  if (notes.empty() || !talk) return;
  print_warning("not carried over from torchtitan checkpoint " + dir + ": " + join(notes, "; "));
}

// A torchtitan checkpoint in the dump folder is never passed over: with checkpointing off
// (titan's resume off) it is one error saying what decides.
void refuse_unused_torchtitan_steps(const config::TrainerConfig& cfg) {
  if (cfg.checkpoint.enable) return;
  const fs::path folder = fs::path(cfg.job.dump_folder) / cfg.checkpoint.folder;
  const std::vector<int64_t> steps = torchtitan_steps(folder.string());
  if (steps.empty()) return;
  fail((folder / checkpoint::step_folder_name(steps.back())).string(),
       " is a torchtitan checkpoint in this job's checkpoint folder, and checkpointing is off: "
       "give --checkpoint.enable to resume from it (as torchtitan would), or another "
       "--job.dump_folder to start without it");
}

// Resuming from torchtitan's step-N: a full checkpoint carries the weights, AdamW's state, the
// step and the data position; a model-only one (a seed checkpoint) the weights, at step 0.
int64_t resume_from_torchtitan(const config::TrainerConfig& cfg, models::ModelTensors& model,
                               CheckpointManager& checkpoints, int64_t step,
                               const checkpoint::TensorLayout& layout) {
  const std::string dir = checkpoints.step_dir(step);
  const checkpoint::TorchtitanCheckpointReader reader =
      checkpoint::open_torchtitan_checkpoint(model, dir, describe_model(cfg), layout);
  TITAN_CHECK(reader.full() || step == 0, dir,
              " is a model-only torchtitan checkpoint (no optimizer, lr_scheduler or "
              "train_state: torchtitan's last_save_model_only), which cannot be resumed from: give "
              "it as --checkpoint.initial_load_path to start from its weights, in another "
              "--job.dump_folder");
  const std::vector<std::string> notes = checkpoints.restore_torchtitan(reader, !reader.full());
  if (layout.coordinator()) {
    std::cout << "[titan] resumed from torchtitan checkpoint " << dir << " (step " << step
              << (reader.full() ? "" : ", its weights") << ")" << std::endl;
  }
  warn_not_carried(dir, notes, layout.coordinator());
  return step;
}

}  // namespace

int64_t load_initial_state(const config::TrainerConfig& cfg, const models::ModelSpec& spec,
                           models::ModelTensors& model, CheckpointManager& checkpoints,
                           const checkpoint::TensorLayout& layout, bool base_loaded) {
  const bool talk = layout.coordinator();
  const auto& ck = cfg.checkpoint;
  refuse_unused_torchtitan_steps(cfg);
  if (const std::optional<int64_t> step = checkpoints.resumable_step()) {
    if (checkpoints.is_torchtitan_step(*step))
      return resume_from_torchtitan(cfg, model, checkpoints, *step, layout);
    const auto& excluded = ck.exclude_from_loading;
    if (std::find(excluded.begin(), excluded.end(), checkpoint::kModelPart) == excluded.end())
      check_resumable_model(model.hf_config("float32"), cfg.model.name,
                            checkpoints.step_dir(*step));
    checkpoints.resume(*step);
    if (talk) {
      std::cout << "[titan] resumed from training checkpoint " << checkpoints.step_dir(*step)
                << " (step " << *step << ")" << std::endl;
    }
    return *step;
  }
  if (base_loaded) return 0;
  const std::string path = initial_load_path(cfg);
  if (path.empty()) {
    if (talk)
      std::cout << "[titan] fresh initialisation (seed " << cfg.training.seed << ")" << std::endl;
    return 0;
  }
  // torchtitan's checkpoint (a DCP folder): its weights, as torchtitan's
  // initial_load_model_only; everything but checkpoint.exclude_from_loading without it.
  if (checkpoint::is_dcp_checkpoint(path)) {
    const checkpoint::TorchtitanCheckpointReader reader =
        checkpoint::open_torchtitan_checkpoint(model, path, describe_model(cfg), layout);
    const std::vector<std::string> notes =
        checkpoints.restore_torchtitan(reader, ck.initial_load_model_only);
    if (talk) std::cout << "[titan] initial load of torchtitan checkpoint " << path << std::endl;
    warn_not_carried(path, notes, talk);
    return 0;
  }
  // A training checkpoint (step-N, its manifest.json) is loaded as one whatever
  // initial_load_in_hf says: its files are not a Hugging Face folder's.
  if (fs::exists(fs::path(path) / "manifest.json")) {
    checkpoints.load_from(path, ck.initial_load_model_only);
    if (talk) {
      std::cout << "[titan] initial load from training checkpoint " << path
                << (ck.initial_load_in_hf
                        ? " (a training checkpoint: checkpoint.initial_load_in_hf does not apply)"
                        : "")
                << std::endl;
    }
    return 0;
  }
  if (spec.loads_pretrained_in_build) {
    // The model spec's builder loaded them (Transformers' from_pretrained).
    if (talk)
      std::cout << "[titan] Hugging Face weights from " << path << " (loaded by the " << spec.name
                << " backend)" << std::endl;
    return 0;
  }
  checkpoint::load_hf_weights(model, spec, path, layout);
  if (talk) std::cout << "[titan] initial load of Hugging Face weights from " << path << std::endl;
  return 0;
}

}  // namespace titan::train
