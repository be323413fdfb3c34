// LoRA and QLoRA applied to a built model (docs/lora.md), torchtitan's "lora" model converter:
// the targets chosen, an adapter added to each (initialised as PEFT does, or read from
// lora.initial_adapter_path), every other parameter frozen, and with QLoRA the frozen
// projection weights held in NF4. Runs on the whole model, after its base weights are loaded
// and before parallelism splits it, so that every layout starts from the same adapters.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "titan/config/trainer_config.h"
#include "titan/lora/base_fingerprint.h"
#include "titan/lora/lora_targets.h"
#include "titan/models/model.h"

namespace titan::lora {

bool lora_enabled(const config::TrainerConfig& cfg);

struct LoraSetup {
  config::LoraConfig config;
  std::vector<Target> targets;
  BaseFingerprint base;
  int64_t trainable_parameters = 0;  // the adapters' elements
  int64_t frozen_parameters = 0;     // the base's elements (NF4 weights included)
  int64_t base_bytes = 0;            // what the frozen base takes in memory
  int64_t nf4_bytes = 0;             // of which its NF4 weights (QLoRA; on every rank)
  // What a training checkpoint's model part records (the config, the targets, the base).
  nlohmann::json to_json() const;
  // Throws titan::Error naming `where` for a malformed description.
  static LoraSetup from_json(const nlohmann::json& j, const std::string& where);
};

// Applies `lora` to `model`. `seed` initialises the adapters (A uniform in +-1/sqrt(in), B 0).
// The frozen base is held in `compute_dtype` (it needs no float32 master copy: bfloat16 halves
// it under mixed precision, as QLoRA and PEFT keep embeddings, norms and head); the adapters
// keep the parameters' dtype.
LoraSetup apply_lora(models::Model& model, const config::LoraConfig& lora,
                     const BaseFingerprint& base, uint64_t seed,
                     at::ScalarType compute_dtype = at::kFloat);

// Applies a saved setup (a checkpoint's): the same targets, adapters left at zero for the
// checkpoint's tensors to fill, the same quantisation.
void reapply_lora(models::Model& model, const LoraSetup& saved,
                  at::ScalarType compute_dtype = at::kFloat);

// One start-up line: rank, alpha, targets, trainable share, the base's bytes.
std::string describe(const LoraSetup& setup);

// The parameters an optimizer trains and a checkpoint holds: those that require gradients
// (everything without LoRA; the adapters with it).
NamedTensors trainable_parameters(models::Model& model);

}  // namespace titan::lora
