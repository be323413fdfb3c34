#include "titan/train/model_converters.h"

#include <filesystem>
#include <iostream>

#include "titan/checkpoint/dcp_reader.h"
#include "titan/checkpoint/hf_import.h"
#include "titan/common/error.h"
#include "titan/models/materialize.h"
#include "titan/train/state/initial_load.h"

namespace fs = std::filesystem;

namespace titan::train {

std::optional<lora::LoraSetup> apply_model_converters(const config::TrainerConfig& cfg,
                                                      const models::ModelSpec& spec,
                                                      ModelParts& parts,
                                                      at::ScalarType compute_dtype,
                                                      at::Device device, bool talk) {
  if (!lora::lora_enabled(cfg)) return std::nullopt;
  models::Model& model = parts.whole();
  const std::string path = initial_load_path(cfg);
  lora::BaseFingerprint base;
  const uint64_t seed = static_cast<uint64_t>(cfg.training.seed);
  lora::BaseWeights weights;
  weights.spec = &spec;
  weights.seed = seed;
  weights.device = device;
  if (path.empty()) {
    base = lora::fingerprint_seeded(seed, model.hf_config("float32"));
    if (talk)
      std::cout << "[titan] LoRA base: fresh initialisation (seed " << cfg.training.seed
                << "); give checkpoint.initial_load_path to adapt published weights" << std::endl;
  } else {
    TITAN_CHECK(fs::is_directory(path), "checkpoint.initial_load_path ", path,
                ": not a directory (LoRA's base is a Hugging Face folder)");
    TITAN_CHECK(!fs::exists(fs::path(path) / "manifest.json"), "checkpoint.initial_load_path ",
                path,
                " is a training checkpoint; LoRA's base must be a Hugging Face folder (export one "
                "with titan convert)");
    TITAN_CHECK(!checkpoint::is_dcp_checkpoint(path), "checkpoint.initial_load_path ", path,
                " is a torchtitan checkpoint; LoRA's base must be a Hugging Face folder: convert "
                "it with titan convert --from-torchtitan ",
                path, " --to hf DIR (docs/from_torchtitan.md)");
    // A model built on the meta device reads its base weight by weight in apply_lora.
    if (!spec.loads_pretrained_in_build) {
      if (models::has_meta_parameters(model))
        weights.hf_folder = path;
      else
        checkpoint::load_hf_weights(model, spec, path);
    }
    base = lora::fingerprint_hf_folder(path);
    if (talk) std::cout << "[titan] LoRA base: Hugging Face weights from " << path << std::endl;
  }
  lora::LoraSetup setup = lora::apply_lora(model, cfg.lora, base, weights, seed, compute_dtype);
  if (talk) {
    if (!cfg.lora.initial_adapter_path.empty())
      std::cout << "[titan] LoRA adapters from " << cfg.lora.initial_adapter_path << std::endl;
    std::cout << "[titan] " << lora::describe(setup) << std::endl;
  }
  return setup;
}

}  // namespace titan::train
