// The --config-file overlay: a TOML file whose [section] tables set fields of the config
// tree. torchtitan's keys that titan lacks (torchtitan_keys.h) go to their titan field, or are
// noted (`notes` gets one line for each, naming the file and line), or refused. Unknown
// sections or keys, ill-typed values and TOML syntax errors throw titan::Error naming the
// file, the line and the key.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "titan/config/trainer_config.h"

namespace titan::config {

// Reads `path` and applies every key it sets to `config`; keys it does not mention keep
// their values. With `set_keys`, adds "section.key" for every key the file sets.
void apply_toml_file(TrainerConfig& config, const std::string& path,
                     std::set<std::string>* set_keys = nullptr,
                     std::vector<std::string>* notes = nullptr);

// The same for TOML text already in memory; `source_name` stands for the file in messages.
void apply_toml_text(TrainerConfig& config, const std::string& text, const std::string& source_name,
                     std::set<std::string>* set_keys = nullptr,
                     std::vector<std::string>* notes = nullptr);

}  // namespace titan::config
