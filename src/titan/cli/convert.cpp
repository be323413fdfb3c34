// titan convert --from DIR --to DIR: training checkpoint <-> Hugging Face directory, and
// torchtitan's DCP checkpoints in and out (torchtitan_convert.h).
#include <algorithm>
#include <filesystem>
#include <iostream>

#include "titan/checkpoint/checkpoint_names.h"
#include "titan/checkpoint/hf_export.h"
#include "titan/checkpoint/model_part.h"
#include "titan/checkpoint/model_tensors.h"
#include "titan/checkpoint/training_checkpoint.h"
#include "titan/cli/commands.h"
#include "titan/cli/model_source.h"
#include "titan/cli/torchtitan_convert.h"
#include "titan/common/error.h"
#include "titan/config/validate.h"
#include "titan/train/state/final_export.h"

namespace fs = std::filesystem;

namespace titan::cli {
namespace {

constexpr const char* kHelp =
    R"(usage: titan convert --from DIR --to DIR [--dtype float32|bfloat16|float16] [--max-shard-size 5GB]
                     [--lora-format adapter|merged|both]
       titan convert --from DIR --to torchtitan OUT [--dtype float32|bfloat16] [--full]
       titan convert --from-torchtitan STEP_DIR --to hf|titan OUT
                     [--module M --config F | --job.config_file f.toml] [--section.key value ...]

Converts between the two checkpoint kinds:
  a training checkpoint (a step-N folder, or a checkpoint folder: its newest step) -> a
    Hugging Face directory (config.json, safetensors weights in --dtype, tokenizer files);
  a Hugging Face directory -> a training checkpoint holding the model (written to DIR when it
    is named step-N, else to DIR/step-0), which `titan train` resumes from or loads.
A LoRA training checkpoint (model.converters = ["lora"]) is read with its base (the folder it
was trained on, checked against the checkpoint's fingerprint) and written, by --lora-format
(default both), as a merged Hugging Face directory in --to and a PEFT adapter folder in
--to followed by "-adapter" (only an adapter: in --to itself).

torchtitan's checkpoints (docs/from_torchtitan.md, "Your checkpoints"):
  --to torchtitan OUT writes a DCP checkpoint torchtitan 0.3.0 loads: the model only (its
    --checkpoint.initial-load-path), or with --full, from a titan training checkpoint, the
    optimizer state, step and lr position as well (resume it with torchtitan's
    --checkpoint.exclude-from-loading dataloader);
  --from-torchtitan STEP_DIR reads a torchtitan DCP checkpoint (step-N: model-only or full)
    into a Hugging Face folder (--to hf OUT) or a titan training checkpoint (--to titan OUT,
    with the optimizer state and step of a full one). torchtitan records no model description,
    so the config names the model it holds, as for `titan train` (--module/--config, or
    --job.config_file with its [model], or --model.flavor auto with a config.json in
    --model.hf_assets_path); a checkpoint of another architecture is one error naming both.
)";

// `--to KIND DIR` (KIND hf, titan or torchtitan) as --to-kind KIND --to DIR.
Args split_to_kind(const Args& args, std::string& kind) {
  Args out;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--to" && i + 2 < args.size() &&
        (args[i + 1] == "hf" || args[i + 1] == "titan" || args[i + 1] == "torchtitan") &&
        args[i + 2].rfind("--", 0) != 0) {
      kind = args[i + 1];
      out.push_back("--to");
      out.push_back(args[i + 2]);
      i += 2;
      continue;
    }
    out.push_back(args[i]);
  }
  return out;
}

// The arguments of titan convert itself, and the config arguments (--module, --config,
// --job.config_file, --section.key value) that name the model of a torchtitan checkpoint.
void split_config_args(const Args& args, Args& own, Args& config_args) {
  const std::vector<std::string> own_flags = {"--from-torchtitan", "--to", "--dtype",
                                              "--max-shard-size"};
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string flag = args[i].substr(0, args[i].find('='));
    const bool is_own = std::find(own_flags.begin(), own_flags.end(), flag) != own_flags.end();
    Args& into = is_own ? own : config_args;
    into.push_back(args[i]);
    if (args[i].find('=') == std::string::npos && i + 1 < args.size() &&
        args[i + 1].rfind("--", 0) != 0)
      into.push_back(args[++i]);
  }
}

}  // namespace

int run_convert(const Args& args) {
  if (wants_help(args)) {
    std::cout << kHelp;
    return 0;
  }
  std::string to_kind;
  const Args plain = split_to_kind(args, to_kind);
  if (std::find(plain.begin(), plain.end(), "--from-torchtitan") != plain.end() ||
      std::any_of(plain.begin(), plain.end(),
                  [](const std::string& a) { return a.rfind("--from-torchtitan=", 0) == 0; })) {
    Args own, config_args;
    split_config_args(plain, own, config_args);
    const FlagParser flags(own, "convert",
                           {"--from-torchtitan", "--to", "--dtype", "--max-shard-size"});
    return convert_from_torchtitan(flags.require("--from-torchtitan"), to_kind,
                                   flags.require("--to"), config_args, flags.get("--dtype"),
                                   flags.get("--max-shard-size", "5GB"));
  }
  const FlagParser flags(plain, "convert",
                         {"--from", "--to", "--dtype", "--max-shard-size", "--lora-format"},
                         {"--full"});
  const std::string from = flags.require("--from");
  const std::string to = flags.require("--to");
  if (to_kind == "torchtitan")
    return convert_to_torchtitan(from, to, flags.get("--dtype"), flags.has("--full"));
  TITAN_CHECK(!flags.has("--full"), "titan convert: --full applies only to --to torchtitan");
  LoadedModel loaded = load_model(from, models::BuildOptions{});
  TITAN_CHECK(
      to_kind.empty() || (to_kind == "hf") == loaded.from_checkpoint, "titan convert: ", from,
      " is ", loaded.from_checkpoint ? "a training checkpoint" : "a Hugging Face folder",
      ", which converts --to ", loaded.from_checkpoint ? "hf" : "titan", ", not --to ", to_kind);
  if (loaded.lora) {
    const std::string format = flags.get("--lora-format", "both");
    config::check_one_of("--lora-format", format, {"adapter", "merged", "both"});
    train::export_lora(*loaded.spec, *loaded.model, *loaded.lora, format == "adapter" ? "" : to,
                       format == "merged" ? "" : (format == "adapter" ? to : to + "-adapter"),
                       flags.get("--dtype", "float32"),
                       checkpoint::parse_size(flags.get("--max-shard-size", "5GB")),
                       loaded.tokenizer_dir, loaded.lora->base.folder(),
                       checkpoint::whole_tensors());
    return 0;
  }
  TITAN_CHECK(!flags.has("--lora-format"), "titan convert: --lora-format applies only to a LoRA ",
              "training checkpoint, and ", from, " is not one");
  if (loaded.from_checkpoint) {
    checkpoint::export_hf_directory(
        *loaded.model, *loaded.spec, to, flags.get("--dtype", "float32"),
        checkpoint::parse_size(flags.get("--max-shard-size", "5GB")), loaded.tokenizer_dir);
    std::cout << "[titan] wrote Hugging Face directory " << to << std::endl;
    return 0;
  }
  TITAN_CHECK(!flags.has("--dtype"), "titan convert: --dtype applies only to Hugging Face output");
  const fs::path target(to);
  int64_t step = 0;
  std::string folder = to;
  if (const auto named_step = checkpoint::parse_step_folder_name(target.filename().string())) {
    step = *named_step;
    folder = target.parent_path().string();
  }
  checkpoint::TrainingCheckpoint ckpt;
  ckpt.step = step;
  checkpoint::CheckpointPart& model = ckpt.part(checkpoint::kModelPart);
  model.tensors = checkpoint::model_tensors(*loaded.model);
  checkpoint::ModelPartDescription description;
  description.name = loaded.spec->name;
  description.hf_config = loaded.model->hf_config("float32");
  description.hf_assets_path = fs::absolute(from).string();
  model.state = description.to_json();
  ckpt.part(checkpoint::kTrainStatePart).state = {{"step", step}, {"tokens_seen", 0}};
  const checkpoint::CheckpointStore store(folder, 0);
  store.save(ckpt);
  std::cout << "[titan] wrote training checkpoint " << store.step_dir(step) << std::endl;
  return 0;
}

}  // namespace titan::cli
