// titan train --module M --config F [--config-file job.toml] [--section.field value ...]
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "titan/cli/commands.h"
#include "titan/cli/flag_parser.h"
#include "titan/common/error.h"
#include "titan/common/strings.h"
#include "titan/config/config_fields.h"
#include "titan/config/derived_defaults.h"
#include "titan/config/resolve.h"
#include "titan/distributed/launch_env.h"
#include "titan/kernels/ops.h"
#include "titan/models/builtin_configs.h"
#include "titan/train/precision.h"
#include "titan/train/report/run_warnings.h"
#include "titan/train/stop_request.h"
#include "titan/train/trainer.h"

namespace titan::cli {
namespace {

// The help text, with the overridable ops listed from the registry's own table.
constexpr const char* kHelpTemplate =
    R"(usage: titan train --module M --config F [--config-file job.toml] [--section.field value ...]
       titan train --job.config_file job.toml [--section.field value ...]

Trains a model. The config is the named config function (see `titan configs`), overlaid by
each --config-file (or --job.config_file), then by the --section.field overrides in order
(booleans also as bare flags). The resolved config is written to <job.dump_folder>/config.toml;
step lines go to stdout and <job.dump_folder>/metrics.jsonl. A config file that names the model
([model] name and flavor) may come alone, as torchtitan's train_configs do: the run then starts
from the config tree's defaults. torchtitan's keys titan lacks are taken under their titan name,
or noted when they ask for nothing titan lacks ([compile] enable = false, ...), or refused
(docs/from_torchtitan.md).

Every key, its value and a one-line description of it:
  titan configs --module M --config F --print   (with the same overrides: the resolved config)

The built-in default paths (the tokenizer, the corpus) are found beside the installation, paths
you give are relative to the current directory. A Hugging Face folder as
--checkpoint.initial_load_path also supplies the tokenizer and config.json unless
--model.hf_assets_path is given.

Kernel overrides (docs/kernels.md):
  --override.imports "OP=IMPL[@GLOB],..."  which implementation each op uses where (ops:
      @OPS@; GLOB matches
      module paths such as layers.1.* or layers.*.moe; unclaimed call sites use reference)
  --override.libraries LIB.so,...  kernel libraries to load first (they register more IMPLs)
  --override.fallback  use reference where an IMPL does not support the device or dtype
  `titan configs --module M --config F --print` shows the resolved table.

examples:
  titan train --module qwen3 --config qwen3_debugmodel --training.steps 50
  titan train --module qwen3 --config qwen3_0_6b_finetune \
      --checkpoint.initial_load_path path/to/Qwen3-0.6B --training.dataset_path data.jsonl
)";

std::string help_text() {
  std::string ops;
  for (const std::string_view name : kernels::kOpNames)
    ops += (ops.empty() ? "" : ", ") + std::string(name);
  std::string text = kHelpTemplate;
  text.replace(text.find("@OPS@"), 5, ops);
  return text;
}

}  // namespace

int run_train(const Args& args) {
  if (wants_help(args)) {
    std::cout << help_text();
    return 0;
  }
  const config::ResolveOptions options = models::builtin_resolve_options();
  const config::ResolvedCommandLine resolved = config::resolve_command_line(args, options);
  const config::TrainerConfig& cfg = resolved.config;
  config::check_input_paths(cfg, resolved.given_keys);
  const bool talk = distributed::launch_env_from_environment().rank == 0;
  const std::string toml = config::to_toml(cfg);
  if (cfg.debug.print_config) std::cout << toml << std::endl;
  std::cout << "[titan] "
            << (resolved.module.empty() ? join(resolved.config_files)
                                        : resolved.module + "/" + resolved.config_name)
            << ": " << cfg.job.description << std::endl;
  if (talk) {
    for (const std::string& note : config::notes_to_print(resolved))
      std::cout << "[titan] note: " << note << "\n";
    for (const std::string& warning : resolved.warnings) train::print_warning(warning);
    std::cout << "[titan] " << config::describe_model_sources(cfg) << std::endl;
    for (const std::string& warning :
         train::config_warnings(cfg, train::resolve_precision(cfg.training)))
      train::print_warning(warning);
  }

  // A write past a file-size limit (ulimit -f) then fails with EFBIG, reported like a full
  // disk, instead of killing the process in the middle of a save.
  std::signal(SIGXFSZ, SIG_IGN);
  // The resolved config goes into the dump folder once the run has started (a refused start
  // writes nothing there).
  const train::TrainSummary summary = train::run_training(cfg, [&] {
    std::filesystem::create_directories(cfg.job.dump_folder);
    std::ofstream(std::filesystem::path(cfg.job.dump_folder) / "config.toml") << toml;
  });
  if (summary.stop_signal != 0) {
    std::cout << "[titan] stopped by " << train::StopRequest::name(summary.stop_signal)
              << " after step " << summary.last_step << "; "
              << (summary.checkpoint_dir.empty()
                      ? std::string("checkpointing is off (checkpoint.enable), nothing was saved")
                      : "checkpoint at " + summary.checkpoint_dir +
                            " (the same command resumes from it)")
              << std::endl;
    return 0;
  }
  std::cout << "[titan] training done at step " << summary.last_step;
  if (summary.skipped_steps > 0)
    std::cout << " (" << summary.skipped_steps << " steps skipped: non-finite loss or gradient)";
  std::cout << std::endl;
  return 0;
}

}  // namespace titan::cli
