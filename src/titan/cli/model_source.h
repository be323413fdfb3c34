// Opening a model for the inference-side subcommands (forward, eval, generate, convert): a
// Hugging Face directory (config.json + safetensors) or a training checkpoint (a step-N folder
// with manifest.json, or a checkpoint folder whose newest step is taken).
#pragma once

#include <map>
#include <memory>
#include <string>

#include "titan/models/model_spec.h"

namespace titan::cli {

struct LoadedModel {
  const models::ModelSpec* spec = nullptr;
  std::unique_ptr<models::Model> model;
  std::string tokenizer_dir;  // folder holding tokenizer.json, "" when unknown
  bool from_checkpoint = false;
  int64_t step = 0;  // the checkpoint's step
};

// Throws titan::Error naming `path` when it is neither kind or when loading fails.
LoadedModel load_model(const std::string& path, const models::BuildOptions& options);

// "--flag value" lookup over a subcommand's arguments; unknown flags are errors.
class FlagParser {
 public:
  FlagParser(const std::vector<std::string>& args, const std::string& command,
             const std::vector<std::string>& value_flags,
             const std::vector<std::string>& bool_flags = {});
  bool has(const std::string& flag) const;
  std::string get(const std::string& flag, const std::string& fallback = "") const;
  std::string require(const std::string& flag) const;
  int64_t get_int(const std::string& flag, int64_t fallback) const;
  double get_double(const std::string& flag, double fallback) const;

 private:
  std::string command_;
  std::map<std::string, std::string> values_;
};

}  // namespace titan::cli
