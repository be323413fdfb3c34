#include "titan/cli/model_source.h"

#include <filesystem>
#include <regex>

#include "titan/checkpoint/hf_import.h"
#include "titan/checkpoint/training_checkpoint.h"
#include "titan/common/error.h"
#include "titan/train/training_state.h"

namespace fs = std::filesystem;

namespace titan::cli {
namespace {

LoadedModel load_hf(const std::string& dir, const models::BuildOptions& options) {
  const nlohmann::json hf_config = checkpoint::read_hf_config(dir);
  LoadedModel out;
  out.spec = &models::get_model_spec("qwen3");
  models::BuildOptions opts = options;
  opts.init_weights = false;
  out.model = out.spec->build_from_hf_config(hf_config, dir + "/config.json", opts);
  checkpoint::load_hf_weights(*out.model, *out.spec, dir);
  if (fs::exists(fs::path(dir) / "tokenizer.json")) out.tokenizer_dir = dir;
  return out;
}

LoadedModel load_checkpoint(const fs::path& step_dir, const models::BuildOptions& options) {
  static const std::regex pattern("step-([0-9]+)");
  std::smatch m;
  const std::string name = step_dir.filename().string();
  TITAN_CHECK(std::regex_match(name, m, pattern), step_dir.string(),
              ": a training checkpoint folder must be named step-N");
  const checkpoint::CheckpointStore store(step_dir.parent_path().string(), 0);
  const checkpoint::TrainingCheckpoint ckpt =
      store.load(std::stoll(m[1]), {"optimizer", "rng", "dataloader", "lr_scheduler"});
  TITAN_CHECK(ckpt.state.contains("model") && ckpt.state["model"].contains("hf_config"),
              step_dir.string(), "/manifest.json: no model description (state.model.hf_config)");
  const nlohmann::json& desc = ckpt.state["model"];
  LoadedModel out;
  out.spec = &models::get_model_spec(desc.value("name", std::string("qwen3")));
  models::BuildOptions opts = options;
  opts.init_weights = false;
  out.model = out.spec->build_from_hf_config(desc["hf_config"],
                                             (step_dir / "manifest.json").string(), opts);
  train::load_into_model(*out.model, ckpt.model, step_dir.string());
  const std::string assets = desc.value("hf_assets_path", std::string());
  if (!assets.empty() && fs::exists(fs::path(assets) / "tokenizer.json"))
    out.tokenizer_dir = assets;
  out.from_checkpoint = true;
  out.step = ckpt.step;
  return out;
}

}  // namespace

LoadedModel load_model(const std::string& path, const models::BuildOptions& options) {
  const fs::path p(path);
  TITAN_CHECK(fs::exists(p), path, ": no such file or directory");
  if (fs::exists(p / "manifest.json")) return load_checkpoint(p, options);
  if (fs::exists(p / "config.json")) return load_hf(path, options);
  // A checkpoint folder: take its newest complete step.
  const checkpoint::CheckpointStore store(path, 0);
  const auto steps = store.complete_steps();
  TITAN_CHECK(!steps.empty(), path,
              ": neither a Hugging Face directory (config.json) nor a training checkpoint "
              "(step-N/manifest.json)");
  return load_checkpoint(store.step_dir(steps.back()), options);
}

}  // namespace titan::cli
