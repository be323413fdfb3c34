// Resolution of a command line into a TrainerConfig, in this order:
//   1. the config function named by --module M --config F (or, with neither, the tree's
//      defaults when a --job.config_file names the model: torchtitan's way with a file),
//   2. each --config-file job.toml (or --job.config_file, torchtitan's name), in the order given,
//   3. each --section.field override, in the order given: "--a.b value", "--a.b=value", and
//      for booleans also a bare "--a.b" (true) or "--a.b true|false",
//   4. the defaults that follow from the others (derived_defaults.h),
// then validate_config(). Flags without a dot that the command accepts (--print) come back
// separately; any other argument is an error.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "titan/config/config_registry.h"
#include "titan/config/trainer_config.h"

namespace titan::config {

struct ResolveOptions {
  // --module and --config are required (titan train, titan configs --print). When false and
  // both are absent, resolution starts from the TrainerConfig defaults.
  bool require_config_function = true;
  // Bare flags the command accepts besides --module/--config/--config-file, e.g. "--print".
  std::vector<std::string> extra_flags = {};
  bool validate = true;
  // nullptr: config_registry() (callers normally pass &models::builtin_config_registry()).
  const ConfigRegistry* registry = nullptr;
  // The accepted model.name values (the model registry's names); empty skips that check.
  std::vector<std::string> model_names = {};
  // The installation's root folder, against which the built-in default paths are taken
  // (derived_defaults.h); "" leaves them relative to the current directory.
  std::string install_root = "";
};

struct ResolvedCommandLine {
  TrainerConfig config;
  std::string module;       // empty when no config function was named
  std::string config_name;  // empty when no config function was named
  std::vector<std::string> config_files;
  // "section.key" of every key a config file or an override set (the rest are the config
  // function's).
  std::set<std::string> given_keys;
  std::set<std::string> flags;  // the extra_flags that were given
  bool print = false;           // "--print" was given (and accepted)
  // One line for each setting titan accepted without taking it as written: torchtitan's keys
  // it renames or that ask nothing of it (torchtitan_keys.h), torchtitan's dataset names, the
  // eos token of packing torchtitan. Each names where the setting came from.
  std::vector<std::string> notes;
  // Settings that would change the run without a word: lora.* given without the lora converter.
  std::vector<std::string> warnings;
};

ResolvedCommandLine resolve_command_line(const std::vector<std::string>& args,
                                         const ResolveOptions& options = {});

// The notes to print for job.config_notes: all of them (each), one line counting them
// (summary), or none (off).
std::vector<std::string> notes_to_print(const ResolvedCommandLine& resolved);

// Just the config of resolve_command_line().
TrainerConfig resolve_config(const std::vector<std::string>& args, ResolveOptions options = {});

}  // namespace titan::config
