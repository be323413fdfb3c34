// What a LoRA training checkpoint records of the frozen base it trained on, instead of the base
// itself (docs/lora.md): where it came from, and a fingerprint of its contents, so that a resume
// refuses another base. A base loaded from a Hugging Face folder is fingerprinted by its
// config.json and safetensors files (names, sizes and a 64-bit hash of all their bytes); a
// freshly initialised base by its seed and its Hugging Face config.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace titan::lora {

// The source string is built and read here only (fingerprint_seeded, seed(), folder()).
struct BaseFingerprint {
  std::string source;  // the folder's absolute path, or "seed N"
  std::string digest;  // hex
  nlohmann::json to_json() const { return {{"source", source}, {"digest", digest}}; }
  // The seed of a freshly initialised base; nothing for a base read from a folder.
  std::optional<uint64_t> seed() const;
  // The folder of a base read from one; "" for a seeded base.
  std::string folder() const { return seed() ? std::string() : source; }
  // Throws titan::Error naming `where` when the JSON is not a fingerprint.
  static BaseFingerprint from_json(const nlohmann::json& j, const std::string& where);
};

BaseFingerprint fingerprint_hf_folder(const std::string& dir);
BaseFingerprint fingerprint_seeded(uint64_t seed, const nlohmann::json& hf_config);

// Throws titan::Error when `saved` (what a checkpoint in `checkpoint_dir` trained on) is not
// `current`, naming both sources.
void check_same_base(const BaseFingerprint& saved, const BaseFingerprint& current,
                     const std::string& checkpoint_dir);

}  // namespace titan::lora
