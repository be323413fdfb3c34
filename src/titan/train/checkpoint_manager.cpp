#include "titan/train/checkpoint_manager.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>

#include "titan/checkpoint/checkpoint_names.h"
#include "titan/checkpoint/model_tensors.h"
#include "titan/common/error.h"
#include "titan/common/strings.h"
#include "titan/train/resume_config_check.h"

namespace fs = std::filesystem;

namespace titan::train {
namespace {

bool excluded(const std::vector<std::string>& exclude, const std::string& part) {
  return std::find(exclude.begin(), exclude.end(), part) != exclude.end();
}

// The pieces of `tensors` this process writes, recorded as pieces where they are sharded.
void add_pieces(const NamedTensors& tensors, const checkpoint::TensorLayout& layout,
                NamedTensors& out, std::map<std::string, checkpoint::PieceOf>& pieces) {
  for (const auto& [name, local] : tensors) {
    const checkpoint::LocalRows rows = layout.rows(name, local);
    if (!rows.writer) continue;
    if (!rows.sharded) {
      out.emplace_back(name, local);
      continue;
    }
    out.emplace_back(name, local.narrow(0, 0, rows.real_rows));
    pieces[name] = {rows.full_shape, rows.begin};
  }
}

// Fills `local` (this rank's rows, zero-padded) from the checkpoint.
void read_into(const checkpoint::CheckpointReader& reader, const std::string& part,
               const std::string& name, const checkpoint::LocalRows& rows, at::Tensor local,
               const std::string& source) {
  TITAN_CHECK(reader.global_shape(part, name) == rows.full_shape, source, ": ", part, " tensor '",
              name, "' has shape ", shape_to_string(reader.global_shape(part, name)),
              " but this run expects ", shape_to_string(rows.full_shape));
  at::NoGradGuard no_grad;
  if (!rows.sharded) {
    local.copy_(reader.read_rows(part, name, 0, rows.full_shape.empty() ? 1 : rows.full_shape[0]));
    return;
  }
  local.zero_();
  local.narrow(0, 0, rows.real_rows)
      .copy_(reader.read_rows(part, name, rows.begin, rows.begin + rows.real_rows));
}

}  // namespace

CheckpointManager::CheckpointManager(const config::TrainerConfig& cfg,
                                     const models::ModelSpec& spec, models::Model& model,
                                     AdamW& optimizer, data::DataLoader& loader,
                                     const checkpoint::TensorLayout& layout,
                                     checkpoint::SaveCoordination coordination)
    : cfg_(cfg),
      spec_(spec),
      model_(model),
      optimizer_(optimizer),
      loader_(loader),
      layout_(layout),
      coordination_(std::move(coordination)),
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
  restore(store_.step_dir(step), cfg_.checkpoint.exclude_from_loading);
}

void CheckpointManager::load_from(const std::string& step_dir, bool model_only) {
  checkpoint::step_of_folder(step_dir);  // must be named step-N
  const std::vector<std::string> exclude =
      model_only ? std::vector<std::string>{"optimizer", "lr_scheduler", "dataloader",
                                            "train_state", "rng"}
                 : cfg_.checkpoint.exclude_from_loading;
  restore(step_dir, exclude);
}

checkpoint::TrainingCheckpoint CheckpointManager::snapshot(
    int64_t step, const nlohmann::json* loader_state) const {
  checkpoint::TrainingCheckpoint c;
  c.step = step;
  add_pieces(checkpoint::model_tensors(model_), layout_, c.model, c.pieces);
  add_pieces(optimizer_.state(), layout_, c.optimizer, c.pieces);
  if (layout_.coordinator())
    c.rng.emplace_back("cpu", at::detail::getDefaultCPUGenerator().get_state());
  c.state["train_state"] = {{"step", step}, {"tokens_seen", tokens_seen_}};
  c.state["lr_scheduler"] = {{"last_step", step}};
  c.state["dataloader"] = loader_state ? *loader_state : loader_.state();
  c.state["config"] = saved_config_text(cfg_);  // compared on resume (resume_config_check.h)
  // Enough to rebuild the model without the job's config (titan convert / eval / generate).
  c.state["model"] = {{"name", spec_.name},
                      {"hf_config", model_.hf_config("float32")},
                      {"hf_assets_path", fs::absolute(cfg_.model.hf_assets_path).string()}};
  return c;
}

void CheckpointManager::restore(const std::string& step_dir,
                                const std::vector<std::string>& exclude) {
  for (const auto& part : exclude) {
    TITAN_CHECK(
        std::find(checkpoint::checkpoint_parts().begin(), checkpoint::checkpoint_parts().end(),
                  part) != checkpoint::checkpoint_parts().end(),
        "checkpoint.exclude_from_loading: unknown part '", part,
        "'; accepted: model, optimizer, lr_scheduler, dataloader, train_state, rng");
  }
  const checkpoint::CheckpointReader reader(step_dir);
  if (!excluded(exclude, "model")) {
    // Every model tensor must be there, and nothing else: checked before anything is copied.
    const NamedTensors tensors = checkpoint::model_tensors(model_);
    std::set<std::string> ours;
    for (const auto& [name, local] : tensors) {
      ours.insert(name);
      TITAN_CHECK(reader.contains("model", name), step_dir, ": missing tensor '", name, "'");
      TITAN_CHECK(reader.global_shape("model", name) == layout_.rows(name, local).full_shape,
                  step_dir, ": tensor '", name, "' has shape ",
                  shape_to_string(reader.global_shape("model", name)), " but the model expects ",
                  shape_to_string(layout_.rows(name, local).full_shape));
    }
    for (const std::string& name : reader.names("model"))
      TITAN_CHECK(ours.count(name), step_dir, ": unexpected tensor '", name, "'");
    for (const auto& [name, local] : tensors)
      read_into(reader, "model", name, layout_.rows(name, local), local, step_dir);
  }
  if (!excluded(exclude, "optimizer")) {
    // The moments have their parameter's layout; the step counters are whole.
    std::map<std::string, at::Tensor> params;
    for (const auto& [name, p] : model_.named_parameters()) params[name] = p;
    NamedTensors state;
    for (const std::string& name : reader.names("optimizer")) {
      std::string param = name;
      for (const char* suffix : {".exp_avg_sq", ".exp_avg", ".step"}) {
        if (name.ends_with(suffix)) {
          param = name.substr(0, name.size() - std::string(suffix).size());
          break;
        }
      }
      auto it = params.find(param);
      if (it == params.end() || name.ends_with(".step")) {
        state.emplace_back(name, reader.read("optimizer", name));
        continue;  // AdamW::load_state names what does not belong
      }
      at::Tensor local = at::empty_like(it->second, it->second.options().requires_grad(false));
      read_into(reader, "optimizer", name, layout_.rows(name, local), local, step_dir);
      state.emplace_back(name, local);
    }
    if (!state.empty()) optimizer_.load_state(state);
  }
  if (!excluded(exclude, "rng") && reader.contains("rng", "cpu")) {
    at::Generator gen = at::detail::getDefaultCPUGenerator();
    gen.set_state(reader.read("rng", "cpu"));
  }
  const nlohmann::json& state = reader.state();
  if (!excluded(exclude, "dataloader") && state.contains("dataloader"))
    loader_.load_state(state["dataloader"]);
  if (!excluded(exclude, "train_state") && state.contains("train_state")) {
    const auto& train_state = state["train_state"];
    TITAN_CHECK(train_state.is_object() && (!train_state.contains("tokens_seen") ||
                                            train_state["tokens_seen"].is_number_integer()),
                step_dir, "/manifest.json: state.train_state.tokens_seen must be an integer");
    tokens_seen_ = train_state.value("tokens_seen", int64_t{0});
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

bool CheckpointManager::save_before_stopping(int64_t step, const nlohmann::json& loader_state) {
  if (!cfg_.checkpoint.enable || step < 1) return false;
  finish();
  store_.save(snapshot(step, &loader_state), coordination_);
  if (layout_.coordinator())
    std::cout << "[titan] saved training checkpoint " << store_.step_dir(step) << std::endl;
  return true;
}

}  // namespace titan::train
