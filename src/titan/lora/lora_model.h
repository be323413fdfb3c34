// LoRA and QLoRA applied to a built model (docs/lora.md), torchtitan's "lora" model converter:
// the targets chosen, an adapter added to each (initialised as PEFT does, or read from
// lora.initial_adapter_path), every other parameter frozen, and with QLoRA the frozen
// projection weights held in NF4. Runs on the whole model, before parallelism splits it, so
// that every layout starts from the same adapters.
//
// A model built on the meta device (BuildOptions::meta_parameters, the native model) gets its
// frozen base here, weight by weight (models/materialize.h): each is read from the Hugging
// Face folder (or drawn from the seeded init), stored in the frozen dtype and, under QLoRA,
// quantised at once, so the base never exists whole in full precision. A model built with its
// weights (the Transformers backend) is converted in place.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "titan/config/trainer_config.h"
#include "titan/lora/base_fingerprint.h"
#include "titan/lora/lora_targets.h"
#include "titan/models/model.h"
#include "titan/models/model_spec.h"

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

// Where the frozen base's values come from, for a model built on the meta device.
struct BaseWeights {
  const models::ModelSpec* spec = nullptr;  // its state-dict adapter reads hf_folder
  std::string hf_folder;                    // a Hugging Face folder; empty: the seeded init
  uint64_t seed = 0;                        // of the model's own initialisation
  at::Device device = at::kCPU;             // where the model lives
};

// Applies `lora` to `model`. `seed` initialises the adapters (A uniform in +-1/sqrt(in), B 0),
// which keep the parameters' dtype. The frozen base is held in `compute_dtype` (it needs no
// float32 master copy: bfloat16 halves it under mixed precision, as QLoRA and PEFT keep
// embeddings, norms and head).
LoraSetup apply_lora(models::Model& model, const config::LoraConfig& lora,
                     const BaseFingerprint& base, const BaseWeights& weights, uint64_t seed,
                     at::ScalarType compute_dtype = at::kFloat);

// Applies a saved setup (a checkpoint's): the same targets, adapters uninitialised for the
// checkpoint's tensors to fill, the same base and quantisation.
void reapply_lora(models::Model& model, const LoraSetup& saved, const BaseWeights& weights,
                  at::ScalarType compute_dtype = at::kFloat);

// One start-up line: rank, alpha, targets, trainable share, the base's bytes.
std::string describe(const LoraSetup& setup);

// The parameters an optimizer trains and a checkpoint holds: those that require gradients
// (everything without LoRA; the adapters with it).
NamedTensors trainable_parameters(models::ModelTensors& model);

}  // namespace titan::lora
