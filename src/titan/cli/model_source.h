// Opening a model for the inference-side subcommands (forward, eval, generate, convert): a
// Hugging Face directory (config.json + safetensors), a training checkpoint (a step-N folder
// with manifest.json, or a checkpoint folder whose newest step is taken), or a PEFT adapter
// folder (adapter_config.json + adapter_model.safetensors) on its base: the Hugging Face folder
// `adapter_base`, else the one its adapter_config.json names (base_model_name_or_path).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "titan/cli/flag_parser.h"
#include "titan/lora/lora_model.h"
#include "titan/models/model_spec.h"

namespace titan::cli {

struct LoadedModel {
  const models::ModelSpec* spec = nullptr;
  std::unique_ptr<models::Model> model;
  std::string tokenizer_dir;  // folder holding tokenizer.json, "" when unknown
  bool from_checkpoint = false;
  int64_t step = 0;  // the checkpoint's step
  // A LoRA training checkpoint: its setup (the model is then its base, loaded again from where
  // the checkpoint says, with the checkpoint's adapters).
  std::optional<lora::LoraSetup> lora;
};

// A LoRA checkpoint's base is loaded from the folder it names (its fingerprint checked) or
// initialised from its seed again. Throws titan::Error naming `path` when it is neither kind or
// when loading fails. `spec_name`
// picks the model spec for a Hugging Face directory (default: by its config.json's model_type);
// "transformers" runs Transformers' own model of it.
LoadedModel load_model(const std::string& path, const models::BuildOptions& options,
                       const std::string& spec_name = "", const std::string& adapter_base = "");

// The spec_name of a subcommand's --backend native|transformers flag ("" for native); throws
// naming another value.
std::string backend_spec(const FlagParser& flags);

}  // namespace titan::cli
