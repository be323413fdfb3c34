#include "titan/train/training_state.h"

#include <filesystem>
#include <iostream>
#include <map>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>

#include "titan/checkpoint/hf_export.h"
#include "titan/checkpoint/hf_import.h"
#include "titan/common/error.h"

namespace fs = std::filesystem;

namespace titan::train {
namespace {

std::string checkpoint_folder(const config::TrainerConfig& cfg) {
  return (fs::path(cfg.job.dump_folder) / cfg.checkpoint.folder).string();
}

}  // namespace

void load_into_model(models::Model& model, const models::NamedTensors& tensors,
                     const std::string& source) {
  std::map<std::string, at::Tensor> targets;
  for (auto& [name, t] : model.named_parameters()) targets[name] = t;
  for (auto& [name, t] : model.named_buffers()) targets[name] = t;
  for (const auto& [name, t] : tensors) {
    auto it = targets.find(name);
    TITAN_CHECK(it != targets.end(), source, ": unexpected tensor '", name, "'");
    TITAN_CHECK(it->second.sizes() == t.sizes(), source, ": tensor '", name, "' has shape ",
                t.sizes(), " but the model expects ", it->second.sizes());
  }
  for (const auto& [name, target] : targets) {
    bool found = false;
    for (const auto& entry : tensors) found = found || entry.first == name;
    TITAN_CHECK(found, source, ": missing tensor '", name, "'");
  }
  at::NoGradGuard no_grad;
  for (const auto& [name, t] : tensors) targets[name].copy_(t);
}

TrainingState::TrainingState(const config::TrainerConfig& cfg, const models::ModelSpec& spec,
                             models::Model& model, AdamW& optimizer, data::DataLoader& loader)
    : cfg_(cfg),
      spec_(spec),
      model_(model),
      optimizer_(optimizer),
      loader_(loader),
      store_(checkpoint_folder(cfg), cfg.checkpoint.keep_latest_k,
             cfg.debug.checkpoint_write_delay_ms) {
  if (cfg.checkpoint.async_mode == "async")
    async_ = std::make_unique<checkpoint::AsyncCheckpointSaver>(store_);
}

TrainingState::~TrainingState() {
  try {
    finish();
  } catch (...) {
  }
}

int64_t TrainingState::load_initial() {
  const auto& ck = cfg_.checkpoint;
  // 1. Resume from a training checkpoint of this job.
  if (ck.enable) {
    const std::vector<int64_t> steps = store_.complete_steps();
    int64_t step = -1;
    if (ck.load_step >= 0) {
      TITAN_CHECK(std::find(steps.begin(), steps.end(), ck.load_step) != steps.end(),
                  "checkpoint.load_step ", ck.load_step, ": no complete checkpoint step-",
                  ck.load_step, " in ", store_.folder());
      step = ck.load_step;
    } else if (!steps.empty()) {
      step = steps.back();
    }
    if (step >= 0) {
      restore(store_.load(step, ck.exclude_from_loading));
      std::cout << "[titan] resumed from training checkpoint " << store_.step_dir(step) << " (step "
                << step << ")" << std::endl;
      return step;
    }
  }
  // 2. Initial load of weights (a Hugging Face directory, or a training checkpoint folder).
  std::string path = ck.initial_load_path;
  if (path.empty() && ck.initial_load_in_hf) path = cfg_.model.hf_assets_path;
  if (!path.empty()) {
    if (!ck.initial_load_in_hf && fs::exists(fs::path(path) / "manifest.json")) {
      const fs::path dir(path);
      const int64_t step = std::stoll(dir.filename().string().substr(5));
      checkpoint::CheckpointStore source(dir.parent_path().string(), 0);
      auto exclude = ck.initial_load_model_only
                         ? std::vector<std::string>{"optimizer", "lr_scheduler", "dataloader",
                                                    "train_state", "rng"}
                         : ck.exclude_from_loading;
      restore(source.load(step, exclude));
      std::cout << "[titan] initial load from training checkpoint " << path << std::endl;
      return 0;
    }
    checkpoint::load_hf_weights(model_, spec_, path);
    std::cout << "[titan] initial load of Hugging Face weights from " << path << std::endl;
    return 0;
  }
  std::cout << "[titan] fresh initialisation (seed " << cfg_.training.seed << ")" << std::endl;
  return 0;
}

void TrainingState::on_step_end(int64_t step, int64_t tokens) { tokens_seen_ += tokens; }

checkpoint::TrainingCheckpoint TrainingState::snapshot(int64_t step) const {
  checkpoint::TrainingCheckpoint c;
  c.step = step;
  c.model = model_.named_parameters();
  for (auto& b : model_.named_buffers()) c.model.push_back(b);
  c.optimizer = optimizer_.state();
  c.rng.emplace_back("cpu", at::detail::getDefaultCPUGenerator().get_state());
  c.state["train_state"] = {{"step", step}, {"tokens_seen", tokens_seen_}};
  c.state["lr_scheduler"] = {{"last_step", step}};
  c.state["dataloader"] = loader_.state();
  // Enough to rebuild the model without the job's config (titan convert / eval / generate).
  c.state["model"] = {
      {"name", spec_.name},
      {"hf_config", model_.hf_config("float32")},
      {"hf_assets_path", std::filesystem::absolute(cfg_.model.hf_assets_path).string()}};
  return c;
}

void TrainingState::restore(const checkpoint::TrainingCheckpoint& c) {
  if (!c.model.empty()) load_into_model(model_, c.model, store_.step_dir(c.step));
  if (!c.optimizer.empty()) optimizer_.load_state(c.optimizer);
  for (const auto& [name, t] : c.rng)
    if (name == "cpu") {
      at::Generator gen = at::detail::getDefaultCPUGenerator();
      gen.set_state(t);
    }
  if (c.state.contains("dataloader")) loader_.load_state(c.state["dataloader"]);
  if (c.state.contains("train_state"))
    tokens_seen_ = c.state["train_state"].value("tokens_seen", int64_t{0});
}

void TrainingState::maybe_save(int64_t step, bool last) {
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

void TrainingState::finish() {
  if (async_) async_->wait();
}

std::string TrainingState::export_hf_if_requested(int64_t step) {
  if (!cfg_.checkpoint.last_save_in_hf) return "";
  const std::string dir =
      (fs::path(cfg_.job.dump_folder) / "hf" / ("step-" + std::to_string(step))).string();
  checkpoint::export_hf_directory(model_, spec_, dir, cfg_.checkpoint.export_dtype,
                                  checkpoint::parse_size(cfg_.checkpoint.hf_max_shard_size),
                                  cfg_.model.hf_assets_path);
  std::cout << "[titan] exported Hugging Face checkpoint to " << dir << std::endl;
  return dir;
}

}  // namespace titan::train
