#include "titan/train/state/initial_load.h"

#include <algorithm>
#include <filesystem>
#include <iostream>

#include "titan/checkpoint/hf_import.h"
#include "titan/checkpoint/training_checkpoint.h"
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
    const checkpoint::CheckpointStore store((fs::path(cfg.job.dump_folder) / ck.folder).string(),
                                            0);
    if (ck.load_step >= 0 || !store.complete_steps().empty()) return !model_excluded;
  }
  if (initial_load_path(cfg).empty()) return false;
  return ck.initial_load_in_hf || ck.initial_load_model_only || !model_excluded;
}

int64_t load_initial_state(const config::TrainerConfig& cfg, const models::ModelSpec& spec,
                           models::ModelTensors& model, CheckpointManager& checkpoints,
                           const checkpoint::TensorLayout& layout, bool base_loaded) {
  const bool talk = layout.coordinator();
  const auto& ck = cfg.checkpoint;
  if (const std::optional<int64_t> step = checkpoints.resumable_step()) {
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
