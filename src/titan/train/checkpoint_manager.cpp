#include "titan/train/checkpoint_manager.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <filesystem>
#include <iostream>

#include "titan/checkpoint/checkpoint_names.h"
#include "titan/checkpoint/model_tensors.h"
#include "titan/common/error.h"

namespace fs = std::filesystem;

namespace titan::train {

CheckpointManager::CheckpointManager(const config::TrainerConfig& cfg,
                                     const models::ModelSpec& spec, models::Model& model,
                                     AdamW& optimizer, data::DataLoader& loader)
    : cfg_(cfg),
      spec_(spec),
      model_(model),
      optimizer_(optimizer),
      loader_(loader),
      store_((fs::path(cfg.job.dump_folder) / cfg.checkpoint.folder).string(),
             cfg.checkpoint.keep_latest_k, cfg.debug.checkpoint_write_delay_ms) {
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
  const std::vector<int64_t> steps = store_.complete_steps();
  if (ck.load_step >= 0) {
    TITAN_CHECK(std::find(steps.begin(), steps.end(), ck.load_step) != steps.end(),
                "checkpoint.load_step ", ck.load_step, ": no complete checkpoint ",
                checkpoint::step_folder_name(ck.load_step), " in ", store_.folder());
    return ck.load_step;
  }
  if (steps.empty()) return std::nullopt;
  return steps.back();
}

void CheckpointManager::resume(int64_t step) {
  restore(store_.load(step, cfg_.checkpoint.exclude_from_loading), store_.step_dir(step));
}

void CheckpointManager::load_from(const std::string& step_dir, bool model_only) {
  const fs::path dir(step_dir);
  const int64_t step = checkpoint::step_of_folder(step_dir);
  const checkpoint::CheckpointStore source(dir.parent_path().string(), 0);
  const std::vector<std::string> exclude =
      model_only ? std::vector<std::string>{"optimizer", "lr_scheduler", "dataloader",
                                            "train_state", "rng"}
                 : cfg_.checkpoint.exclude_from_loading;
  restore(source.load(step, exclude), step_dir);
}

checkpoint::TrainingCheckpoint CheckpointManager::snapshot(int64_t step) const {
  checkpoint::TrainingCheckpoint c;
  c.step = step;
  c.model = checkpoint::model_tensors(model_);
  c.optimizer = optimizer_.state();
  c.rng.emplace_back("cpu", at::detail::getDefaultCPUGenerator().get_state());
  c.state["train_state"] = {{"step", step}, {"tokens_seen", tokens_seen_}};
  c.state["lr_scheduler"] = {{"last_step", step}};
  c.state["dataloader"] = loader_.state();
  // Enough to rebuild the model without the job's config (titan convert / eval / generate).
  c.state["model"] = {{"name", spec_.name},
                      {"hf_config", model_.hf_config("float32")},
                      {"hf_assets_path", fs::absolute(cfg_.model.hf_assets_path).string()}};
  return c;
}

void CheckpointManager::restore(const checkpoint::TrainingCheckpoint& c,
                                const std::string& source) {
  if (!c.model.empty()) checkpoint::load_into_model(model_, c.model, source);
  if (!c.optimizer.empty()) optimizer_.load_state(c.optimizer);
  for (const auto& [name, t] : c.rng) {
    if (name != "cpu") continue;
    at::Generator gen = at::detail::getDefaultCPUGenerator();
    gen.set_state(t);
  }
  if (c.state.contains("dataloader")) loader_.load_state(c.state["dataloader"]);
  if (c.state.contains("train_state")) {
    const auto& train_state = c.state["train_state"];
    TITAN_CHECK(train_state.is_object() && (!train_state.contains("tokens_seen") ||
                                            train_state["tokens_seen"].is_number_integer()),
                source, "/manifest.json: state.train_state.tokens_seen must be an integer");
    tokens_seen_ = train_state.value("tokens_seen", int64_t{0});
  }
}

void CheckpointManager::maybe_save(int64_t step, bool last) {
  if (!cfg_.checkpoint.enable) return;
  if (step % cfg_.checkpoint.interval != 0 && !last) return;
  if (async_) {
    async_->save(snapshot(step));
  } else {
    store_.save(snapshot(step));
  }
  std::cout << "[titan] saved training checkpoint " << store_.step_dir(step)
            << (async_ ? " (in the background)" : "") << std::endl;
}

void CheckpointManager::finish() {
  if (async_) async_->wait();
}

}  // namespace titan::train
