// Defaults that follow from the rest of the command line rather than from the config function
// alone, applied by resolve_command_line() after the overrides and before validation:
//   1. training.dataset names a built-in dataset (python_stdlib, chat); given without
//      training.dataset_path, it sets that path. torchtitan's names (c4, c4_test, c4_validation)
//      are accepted, with a note, when training.dataset_path is given. Any other name is an
//      error listing them.
//   2. The built-in default paths (the asset paths a config function sets, the user did not
//      give, and that are relative) are taken relative to the installation (the folder that
//      holds the project's assets/, found from the binary's location), so a built-in job runs
//      from any directory. Paths the user gives stay relative to the current directory.
//   3. checkpoint.initial_load_path naming a Hugging Face folder (a config.json, no
//      manifest.json) becomes model.hf_assets_path unless the user gave that: the tokenizer
//      and config.json (flavor auto: the model's dimensions) come from the folder being
//      fine-tuned.
//   4. training.packing and training.document_masking agree: the one given decides
//      (document_masking true alone is packing hf_flattening); with packing torchtitan and no
//      training.eos_token given, the eos token is model.hf_assets_path/tokenizer_config.json's
//      eos_token, as torchtitan takes it.
// Nothing here reads more than whether a file exists (and, for 4, tokenizer_config.json when it
// is there), so printing a config never needs its files; check_input_paths() is the check a
// training run makes before it starts.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "titan/config/trainer_config.h"

namespace titan::config {

// A dataset training.dataset may name, and the file it reads (relative to the installation).
struct BuiltinDataset {
  const char* name;
  const char* path;
};
const std::vector<BuiltinDataset>& builtin_datasets();

// `given_keys` holds "section.key" for every key a --config-file or an override set;
// `install_root` is "" when unknown (the paths then stay relative to the current directory).
// `notes` (may be null) gets a line for each default it took from elsewhere than the config
// (torchtitan's dataset names, the eos token of packing torchtitan).
void apply_derived_defaults(TrainerConfig& config, const std::set<std::string>& given_keys,
                            const std::string& install_root,
                            std::vector<std::string>* notes = nullptr);

// tokenizer_config.json's special token `key` (eos_token, pad_token, ...) in the tokenizer
// folder `assets` (a string or {"content": ...}), as Transformers and torchtitan's
// HuggingFaceTokenizer read it; "" when the file is not there or names none.
std::string tokenizer_config_token(const std::string& assets, const std::string& key);
// Its eos_token.
std::string tokenizer_config_eos(const std::string& assets);

// Where the tokenizer and the model's dimensions come from, as one line for the log, e.g.
// "tokenizer from DIR (checkpoint.initial_load_path), model dimensions from DIR/config.json
// (model.flavor auto)".
std::string describe_model_sources(const TrainerConfig& config);

// The input folders a training run needs, checked before it starts: an error names the key
// (checkpoint.initial_load_path, model.hf_assets_path), the value and what is expected there.
// `given_keys` as for apply_derived_defaults(): a folder of the user's that lacks config.json is
// an error naming it, unless model.hf_assets_path was given.
void check_input_paths(const TrainerConfig& config, const std::set<std::string>& given_keys = {});

}  // namespace titan::config
