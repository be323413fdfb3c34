// titan convert --from DIR --to DIR: training checkpoint <-> Hugging Face directory.
#include <filesystem>
#include <iostream>

#include "titan/checkpoint/checkpoint_names.h"
#include "titan/checkpoint/hf_export.h"
#include "titan/checkpoint/model_part.h"
#include "titan/checkpoint/model_tensors.h"
#include "titan/checkpoint/training_checkpoint.h"
#include "titan/cli/commands.h"
#include "titan/cli/model_source.h"
#include "titan/common/error.h"
#include "titan/config/validate.h"
#include "titan/train/state/final_export.h"

namespace fs = std::filesystem;

namespace titan::cli {
namespace {

constexpr const char* kHelp =
    R"(usage: titan convert --from DIR --to DIR [--dtype float32|bfloat16|float16] [--max-shard-size 5GB]
                     [--lora-format adapter|merged|both]

Converts between the two checkpoint kinds:
  a training checkpoint (a step-N folder, or a checkpoint folder: its newest step) -> a
    Hugging Face directory (config.json, safetensors weights in --dtype, tokenizer files);
  a Hugging Face directory -> a training checkpoint holding the model (written to DIR when it
    is named step-N, else to DIR/step-0), which `titan train` resumes from or loads.
A LoRA training checkpoint (model.converters = ["lora"]) is read with its base (the folder it
was trained on, checked against the checkpoint's fingerprint) and written, by --lora-format
(default both), as a merged Hugging Face directory in --to and a PEFT adapter folder in
--to followed by "-adapter" (only an adapter: in --to itself).
)";

}  // namespace

int run_convert(const Args& args) {
  if (wants_help(args)) {
    std::cout << kHelp;
    return 0;
  }
  const FlagParser flags(args, "convert",
                         {"--from", "--to", "--dtype", "--max-shard-size", "--lora-format"});
  const std::string from = flags.require("--from");
  const std::string to = flags.require("--to");
  LoadedModel loaded = load_model(from, models::BuildOptions{});
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
