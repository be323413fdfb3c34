#include "titan/cli/torchtitan_convert.h"

#include <ATen/core/grad_mode.h>

#include <filesystem>
#include <iostream>

#include "titan/checkpoint/checkpoint_names.h"
#include "titan/checkpoint/hf_export.h"
#include "titan/checkpoint/model_part.h"
#include "titan/checkpoint/model_tensors.h"
#include "titan/checkpoint/torchtitan_checkpoint.h"
#include "titan/checkpoint/training_checkpoint.h"
#include "titan/cli/model_source.h"
#include "titan/common/error.h"
#include "titan/config/derived_defaults.h"
#include "titan/config/resolve.h"
#include "titan/config/toml_overlay.h"
#include "titan/config/validate.h"
#include "titan/models/builtin_configs.h"
#include "titan/models/materialize.h"
#include "titan/train/lr_scheduler.h"
#include "titan/train/optimizer_state_names.h"

namespace fs = std::filesystem;

namespace titan::cli {
namespace {

// "qwen3, flavor debugmodel": the model a config builds, for messages.
std::string describe_config_model(const config::TrainerConfig& cfg) {
  return cfg.model.name + ", flavor " + cfg.model.flavor;
}

// The step a folder name says (step-N), else 0.
int64_t step_of(const std::string& dir) {
  const auto step = checkpoint::parse_step_folder_name(fs::path(dir).filename().string());
  return step.value_or(0);
}

}  // namespace

int convert_from_torchtitan(const std::string& from, const std::string& to_kind,
                            const std::string& to, const std::vector<std::string>& config_args,
                            const std::string& dtype, const std::string& max_shard_size) {
  TITAN_CHECK(checkpoint::is_dcp_checkpoint(from), "titan convert: --from-torchtitan ", from,
              " is not a DCP checkpoint (no .metadata): give a step-N folder of torchtitan's "
              "checkpoint folder");
  TITAN_CHECK(to_kind == "hf" || to_kind == "titan", "titan convert: --from-torchtitan writes ",
              "--to hf DIR or --to titan DIR, not ", to_kind.empty() ? "a bare --to" : to_kind);
  // The model the checkpoint holds: torchtitan records none, so the config names it.
  config::ResolveOptions options = models::builtin_resolve_options();
  options.require_config_function = false;
  options.validate = false;
  const config::ResolvedCommandLine resolved = config::resolve_command_line(config_args, options);
  const config::TrainerConfig& cfg = resolved.config;
  const models::ModelSpec& spec = models::get_model_spec(cfg.model.name);
  TITAN_CHECK(!spec.loads_pretrained_in_build, "titan convert: --from-torchtitan needs a native ",
              "model (model.name qwen3 or llama3), not ", cfg.model.name);
  models::BuildOptions build;
  build.meta_parameters = true;
  std::unique_ptr<models::Model> model = spec.build(cfg, build);
  models::MaterializeOptions where;
  models::materialize(*model, nullptr, where);
  const checkpoint::TorchtitanCheckpointReader reader(
      from, model->named_parameters(), model->named_buffers(), model->hf_config("float32"),
      describe_config_model(cfg));
  {
    at::NoGradGuard no_grad;
    for (auto& [name, t] : checkpoint::model_tensors(*model)) t.copy_(reader.model_tensor(name));
  }
  for (const std::string& note : reader.notes()) std::cout << "[titan] note: " << note << "\n";
  const std::string tokenizer_dir =
      fs::exists(fs::path(cfg.model.hf_assets_path) / "tokenizer.json") ? cfg.model.hf_assets_path
                                                                        : "";
  if (to_kind == "hf") {
    checkpoint::export_hf_directory(*model, spec, to, dtype.empty() ? "float32" : dtype,
                                    checkpoint::parse_size(max_shard_size), tokenizer_dir);
    std::cout << "[titan] wrote Hugging Face directory " << to << " from torchtitan checkpoint "
              << from << std::endl;
    return 0;
  }
  TITAN_CHECK(dtype.empty(), "titan convert: --dtype applies only to --to hf and --to torchtitan");
  // A titan training checkpoint: the model, and from a full checkpoint the optimizer state,
  // the step and the schedule's position (the data position is carried by a resume from the
  // torchtitan folder itself: training.packing torchtitan on the same dataset).
  const int64_t step = reader.full() ? reader.step() : step_of(from);
  fs::path target(to);
  std::string folder = to;
  int64_t saved_step = step;
  if (const auto named = checkpoint::parse_step_folder_name(target.filename().string())) {
    saved_step = *named;
    folder = target.parent_path().string();
  }
  checkpoint::TrainingCheckpoint ckpt;
  ckpt.step = saved_step;
  checkpoint::CheckpointPart& part = ckpt.part(checkpoint::kModelPart);
  part.tensors = checkpoint::model_tensors(*model);
  checkpoint::ModelPartDescription description;
  description.name = spec.name;
  description.hf_config = model->hf_config("float32");
  description.hf_assets_path = tokenizer_dir.empty() ? "" : fs::absolute(tokenizer_dir).string();
  part.state = description.to_json();
  if (reader.full()) {
    checkpoint::CheckpointPart& optimizer = ckpt.part(checkpoint::kOptimizerPart);
    for (const std::string& name : reader.optimizer_names())
      optimizer.tensors.emplace_back(name, reader.optimizer_tensor(name));
    ckpt.part(checkpoint::kLrSchedulerPart).state = {{"last_step", reader.lr_last_epoch()}};
    std::cout << "[titan] note: the data position is not converted (resume from the torchtitan "
                 "folder itself to carry it)\n";
  }
  ckpt.part(checkpoint::kTrainStatePart).state = {{"step", step},
                                                  {"tokens_seen", reader.tokens_seen()}};
  const checkpoint::CheckpointStore store(folder, 0);
  store.save(ckpt);
  std::cout << "[titan] wrote training checkpoint " << store.step_dir(saved_step)
            << " from torchtitan checkpoint " << from
            << (reader.full() ? " (model, optimizer state, step)" : " (model)") << std::endl;
  return 0;
}

int convert_to_torchtitan(const std::string& from, const std::string& to, const std::string& dtype,
                          bool full) {
  LoadedModel loaded = load_model(from, models::BuildOptions{});
  TITAN_CHECK(!loaded.lora, "titan convert: ", from, " is a LoRA checkpoint; convert it --to hf ",
              "(merged) first, then that folder --to torchtitan");
  TITAN_CHECK(!loaded.spec->loads_pretrained_in_build,
              "titan convert --to torchtitan: ", "torchtitan has no model for ", loaded.spec->name);
  const nlohmann::json hf_config = loaded.model->hf_config("float32");
  checkpoint::TorchtitanExport state;
  state.model = checkpoint::model_tensors(*loaded.model);
  state.tied = hf_config.value("tie_word_embeddings", false);
  const std::string export_dtype = dtype.empty() ? "float32" : dtype;
  config::check_one_of("--dtype", export_dtype, {"float32", "bfloat16", "float16"});
  state.dtype = export_dtype == "float32"    ? at::kFloat
                : export_dtype == "bfloat16" ? at::kBFloat16
                                             : at::kHalf;
  if (full) {
    TITAN_CHECK(loaded.from_checkpoint, "titan convert: --full needs a titan training checkpoint ",
                "(the optimizer state), and ", from, " is a Hugging Face folder");
    fs::path step_dir = fs::path(from);
    if (!fs::exists(step_dir / "manifest.json"))
      step_dir = checkpoint::CheckpointStore(from, 0).step_dir(loaded.step);
    const checkpoint::CheckpointReader ckpt(step_dir.string());
    TITAN_CHECK(!ckpt.names(checkpoint::kOptimizerPart).empty(), step_dir.string(),
                " holds no optimizer state (a model-only checkpoint): convert without --full");
    for (const std::string& name : ckpt.names(checkpoint::kOptimizerPart))
      state.optimizer.emplace_back(name, ckpt.read(checkpoint::kOptimizerPart, name));
    state.step = ckpt.step();
    const nlohmann::json train = ckpt.state_of(checkpoint::kTrainStatePart);
    state.tokens_seen = train.is_object() ? train.value("tokens_seen", int64_t{0}) : 0;
    // The optimizer's settings and the schedule, from the config the checkpoint recorded.
    const nlohmann::json saved = ckpt.state_of("config");
    TITAN_CHECK(saved.is_string(), step_dir.string(),
                " records no config (an older checkpoint): the optimizer's settings are unknown");
    config::TrainerConfig cfg;
    config::apply_toml_text(cfg, saved.get<std::string>(), step_dir.string() + " (its config)",
                            nullptr, nullptr);
    const train::LRScheduler schedule(cfg.lr_scheduler, cfg.training.steps, cfg.optimizer.lr);
    state.param_group = {{"lr", schedule.lr_at(state.step)},
                         {"initial_lr", cfg.optimizer.lr},
                         {"betas", cfg.optimizer.betas},
                         {"eps", cfg.optimizer.eps},
                         {"weight_decay", cfg.optimizer.weight_decay}};
  }
  checkpoint::write_torchtitan_checkpoint(to, state, hf_config);
  std::cout << "[titan] wrote torchtitan checkpoint " << to
            << (full ? " (model, optimizer state, step; resume it with torchtitan's "
                       "--checkpoint.exclude-from-loading dataloader)"
                     : " (model only: torchtitan's --checkpoint.initial-load-path)")
            << std::endl;
  return 0;
}

}  // namespace titan::cli
