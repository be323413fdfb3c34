// What a training checkpoint's model part records of the model (state.model in its
// manifest.json), enough to rebuild it without the job's config: the model spec's name, its
// Hugging Face config, the tokenizer folder and, for a LoRA checkpoint, the adapters' setup.
// The trainer and `titan convert` write it, the CLI's model loading reads it: one schema, here.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace titan::checkpoint {

struct ModelPartDescription {
  std::string name = "qwen3";  // the model spec (model.name)
  nlohmann::json hf_config;    // config.json of the model, weights recorded as float32
  std::string hf_assets_path;  // the tokenizer's folder (absolute), or ""
  nlohmann::json lora;         // lora::LoraSetup::to_json(), or null without LoRA

  nlohmann::json to_json() const;
  // Throws titan::Error naming `manifest` for a part without hf_config or with ill-typed keys;
  // a description older than the name key is a qwen3 model.
  static ModelPartDescription from_json(const nlohmann::json& state, const std::string& manifest);
};

}  // namespace titan::checkpoint
