#include "titan/cli/model_source.h"

#include <filesystem>

#include "titan/checkpoint/checkpoint_names.h"
#include "titan/checkpoint/hf_import.h"
#include "titan/checkpoint/model_part.h"
#include "titan/checkpoint/model_tensors.h"
#include "titan/checkpoint/training_checkpoint.h"
#include "titan/common/error.h"
#include "titan/common/file_util.h"
#include "titan/lora/base_fingerprint.h"
#include "titan/models/materialize.h"

namespace fs = std::filesystem;

namespace titan::cli {
namespace {

// Storage for every parameter of a model built on the meta device, uninitialised: a load fills
// it next, tensor by tensor.
void allocate(models::Model& model, const models::BuildOptions& options) {
  if (!models::has_meta_parameters(model)) return;
  models::MaterializeOptions where;
  where.device = options.device;
  models::materialize(model, nullptr, where);
}

LoadedModel load_hf(const std::string& dir, const models::BuildOptions& options,
                    const std::string& spec_name) {
  const nlohmann::json hf_config = checkpoint::read_hf_config(dir);
  const std::string config_path = (fs::path(dir) / "config.json").string();
  LoadedModel out;
  out.spec = spec_name.empty() ? &models::spec_for_hf_config(hf_config, config_path)
                               : &models::get_model_spec(spec_name);
  models::BuildOptions opts = options;
  opts.init_weights = false;
  opts.meta_parameters = true;
  out.model = out.spec->build_from_hf_config(hf_config, config_path, opts);
  if (!out.spec->loads_pretrained_in_build) {
    allocate(*out.model, opts);
    checkpoint::load_hf_weights(*out.model, *out.spec, dir);
  }
  if (fs::exists(fs::path(dir) / "tokenizer.json")) out.tokenizer_dir = dir;
  return out;
}

// A LoRA checkpoint: the base again (from its folder, or its seed), the same adapters and
// quantisation, then the checkpoint's adapters (and buffers).
void load_lora_checkpoint(LoadedModel& out, const nlohmann::json& hf_config,
                          const std::string& manifest, models::BuildOptions opts,
                          const NamedTensors& saved, const std::string& source) {
  const lora::LoraSetup& setup = *out.lora;
  const std::string base = setup.base.folder();
  // The base is read (or drawn) weight by weight as the adapters are put back (lora_model.h).
  opts.meta_parameters = true;
  lora::BaseWeights weights;
  weights.spec = out.spec;
  weights.device = opts.device;
  if (const std::optional<uint64_t> seed = setup.base.seed()) {
    weights.seed = *seed;
    out.model = out.spec->build_from_hf_config(hf_config, manifest, opts);
    lora::check_same_base(setup.base,
                          lora::fingerprint_seeded(weights.seed, out.model->hf_config("float32")),
                          source);
  } else {
    TITAN_CHECK(fs::is_directory(base), source, ": this LoRA checkpoint's base ", base,
                " is not there any more (the checkpoint holds only the adapters)");
    lora::check_same_base(setup.base, lora::fingerprint_hf_folder(base), source);
    out.model = out.spec->build_from_hf_config(checkpoint::read_hf_config(base),
                                               (fs::path(base) / "config.json").string(), opts);
    weights.hf_folder = base;
  }
  lora::reapply_lora(*out.model, setup, weights, opts.compute_dtype);
  NamedTensors targets = lora::trainable_parameters(*out.model);
  for (auto& b : out.model->named_buffers()) targets.push_back(b);
  checkpoint::load_into(targets, saved, source);
}

LoadedModel load_checkpoint(const fs::path& step_dir, const models::BuildOptions& options) {
  const int64_t step = checkpoint::step_of_folder(step_dir.string());
  const checkpoint::CheckpointStore store(step_dir.parent_path().string(), 0);
  // Only the model part is read.
  std::vector<std::string> others;
  for (const std::string& part : checkpoint::checkpoint_parts())
    if (part != checkpoint::kModelPart) others.push_back(part);
  const checkpoint::TrainingCheckpoint ckpt = store.load(step, others);
  const std::string manifest = (step_dir / "manifest.json").string();
  const checkpoint::CheckpointPart* model = ckpt.find(checkpoint::kModelPart);
  TITAN_CHECK(model != nullptr, manifest, ": no model description (state.model.hf_config)");
  const checkpoint::ModelPartDescription desc =
      checkpoint::ModelPartDescription::from_json(model->state, manifest);
  LoadedModel out;
  out.spec = &models::get_model_spec(desc.name);
  models::BuildOptions opts = options;
  opts.init_weights = false;
  if (!desc.lora.is_null()) {
    out.lora = lora::LoraSetup::from_json(desc.lora, manifest);
    load_lora_checkpoint(out, desc.hf_config, manifest, opts, model->tensors, step_dir.string());
  } else {
    opts.meta_parameters = true;
    out.model = out.spec->build_from_hf_config(desc.hf_config, manifest, opts);
    allocate(*out.model, opts);
    checkpoint::load_into_model(*out.model, model->tensors, step_dir.string());
  }
  if (!desc.hf_assets_path.empty() && fs::exists(fs::path(desc.hf_assets_path) / "tokenizer.json"))
    out.tokenizer_dir = desc.hf_assets_path;
  out.from_checkpoint = true;
  out.step = ckpt.step;
  return out;
}

// A PEFT adapter folder: its base (a Hugging Face folder), then the adapters read into the
// targets its adapter_config.json names (target_modules, and target_parameters for expert
// stacks), as PeftModel.from_pretrained(base, folder) applies them.
LoadedModel load_peft_adapter(const std::string& dir, const models::BuildOptions& options,
                              const std::string& spec_name, const std::string& base_override) {
  const std::string config_path = (fs::path(dir) / "adapter_config.json").string();
  nlohmann::json adapter;
  try {
    adapter = nlohmann::json::parse(read_text_file(config_path));
  } catch (const nlohmann::json::exception& e) {
    fail(config_path, " is not valid JSON: ", e.what());
  }
  TITAN_CHECK(adapter.is_object(), config_path, " is not a JSON object");
  std::string base = base_override;
  if (base.empty() && adapter.contains("base_model_name_or_path") &&
      adapter["base_model_name_or_path"].is_string())
    base = adapter["base_model_name_or_path"].get<std::string>();
  TITAN_CHECK(!base.empty(), dir,
              " is a PEFT adapter whose adapter_config.json names no base "
              "(base_model_name_or_path): give --base DIR, the Hugging Face folder it was trained "
              "on");
  TITAN_CHECK(fs::exists(fs::path(base) / "config.json"), dir, " is a PEFT adapter on ", base,
              base_override.empty() ? " (its adapter_config.json's base_model_name_or_path)" : "",
              ", which is not a Hugging Face folder here",
              base_override.empty() ? ": download it (build/bin/hf download " + base +
                                          " --local-dir DIR) and give --base DIR"
                                    : "");
  LoadedModel out = load_hf(base, options, spec_name);
  config::LoraConfig lora;
  TITAN_CHECK(adapter.contains("r") && adapter["r"].is_number_integer() &&
                  adapter.contains("lora_alpha") && adapter["lora_alpha"].is_number(),
              config_path, ": needs r and lora_alpha");
  lora.rank = adapter["r"].get<int64_t>();
  lora.alpha = adapter["lora_alpha"].get<double>();
  for (const char* key : {"target_modules", "target_parameters"}) {
    if (!adapter.contains(key) || adapter[key].is_null()) continue;
    const nlohmann::json& targets = adapter[key];
    if (targets.is_string()) {
      // PEFT's "all-linear" is titan's default (every projection); a regex is not read.
      TITAN_CHECK(targets.get<std::string>() == "all-linear", config_path, ": ", key, " = ",
                  targets.dump(), " is a regular expression; titan reads a list of module names");
      continue;
    }
    TITAN_CHECK(targets.is_array(), config_path, ": ", key, " must be a list of module names");
    for (const auto& t : targets) lora.target_modules.push_back(t.get<std::string>());
  }
  lora.initial_adapter_path = dir;
  lora::BaseWeights weights;  // the base is already loaded: only where the adapters live
  weights.device = options.device;
  out.lora = lora::apply_lora(*out.model, lora, lora::fingerprint_hf_folder(base), weights, 0,
                              options.compute_dtype);
  if (fs::exists(fs::path(dir) / "tokenizer.json")) out.tokenizer_dir = dir;
  return out;
}

}  // namespace

LoadedModel load_model(const std::string& path, const models::BuildOptions& options,
                       const std::string& spec_name, const std::string& adapter_base) {
  const fs::path p(path);
  TITAN_CHECK(fs::exists(p), path, ": no such file or directory");
  if (fs::exists(p / "adapter_config.json") && !fs::exists(p / "config.json"))
    return load_peft_adapter(path, options, spec_name, adapter_base);
  TITAN_CHECK(adapter_base.empty(), "--base ", adapter_base,
              " applies only to a PEFT adapter "
              "folder (adapter_config.json), and ",
              path, " is not one");
  if (fs::exists(p / "manifest.json")) return load_checkpoint(p, options);
  if (fs::exists(p / "config.json")) return load_hf(path, options, spec_name);
  // A checkpoint folder: take its newest complete step.
  const checkpoint::CheckpointStore store(path, 0);
  const auto steps = store.complete_steps();
  TITAN_CHECK(!steps.empty(), path,
              ": neither a Hugging Face directory (config.json) nor a training checkpoint "
              "(step-N/manifest.json)");
  return load_checkpoint(store.step_dir(steps.back()), options);
}

std::string backend_spec(const FlagParser& flags) {
  const std::string backend = flags.get("--backend", "native");
  TITAN_CHECK(backend == "native" || backend == "transformers", "--backend '", backend,
              "' is not native or transformers");
  return backend == "transformers" ? "transformers" : "";
}

}  // namespace titan::cli
