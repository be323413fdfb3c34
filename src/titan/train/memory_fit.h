// Whether a run fits the memory it has, checked at start-up on the model's shapes (the model
// is built on the meta device), before any weight has storage. A run whose model state alone
// cannot fit stops there with one error naming the sizes and the settings that would fit,
// instead of being killed by the kernel's out-of-memory killer part-way through loading
// (docs/operations.md, "Memory").
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>

#include "titan/config/trainer_config.h"
#include "titan/distributed/parallel_dims.h"
#include "titan/train/model_parts.h"
#include "titan/train/precision.h"

namespace titan::train {

// What one rank holds of the model's state, in bytes (an estimate from shapes; the start-up
// line prints the measured one once parallelism has split the model).
struct ModelStateEstimate {
  double parameters = 0;  // what the optimizer updates (with LoRA: the adapters)
  double gradients = 0;
  double optimizer = 0;    // the optimizer's moments (AdamW8bit's in 8-bit blocks)
  double frozen = 0;       // LoRA's frozen base (NF4 projections with QLoRA)
  double activations = 0;  // one micro-batch's saved activations, under the run's checkpointing
  double model_state() const { return parameters + gradients + optimizer + frozen; }
};

// What an estimate is of: this rank's model parts (they may be on the meta device; a pipeline
// stage counts its own layers only), the run's settings, and the tokens of a row this rank's
// activations hold (MeshContext::local_sequence).
struct MemoryFitRun {
  ModelParts& model;
  const config::TrainerConfig& cfg;
  const Precision& precision;
  const distributed::ParallelDims& dims;
  int64_t local_sequence = 0;
};

// With model.converters = ["lora"] the estimate is the adapters' and the frozen base's.
ModelStateEstimate estimate_model_state(const MemoryFitRun& run);

// The same model under another converter setting, for the error's suggestions.
ModelStateEstimate estimate_with_lora(const MemoryFitRun& run,
                                      const std::string& base_quantization);

// The memory this process may use: on the CPU, the machine's available memory (the cgroup's
// limit, where lower) shared by the `local_ranks` processes of this machine; on CUDA, the
// device's free memory. 0 when it cannot be told.
double available_memory_bytes(at::Device device, int64_t local_ranks);

// Throws titan::Error when the model state exceeds `available` (naming both, and the settings
// that would fit: LoRA, QLoRA, more ranks to shard over); returns a warning when the state
// fits but the activations on top of it may not (suggesting activation checkpointing), else "".
std::string check_memory_fits(const ModelStateEstimate& estimate, double available,
                              const MemoryFitRun& run);

// "12.3 GiB"
std::string format_gib(double bytes);

}  // namespace titan::train
