// The start-up line each rank prints of the model state it holds: its parameters, as much again
// of gradients and the optimizer's state (twice as much for AdamW's moments, about a quarter of
// that for AdamW8bit's, docs/optimizers.md), and their share of the whole model's (of
// every stage's under a pipeline), which parallelism should bring close to 1 / (the ranks it
// splits the model over); with LoRA the adapters' share and the frozen base.
#pragma once

#include <string>

#include "titan/distributed/mesh_context.h"
#include "titan/lora/lora_model.h"
#include "titan/models/model.h"
#include "titan/train/optimizer.h"

namespace titan::train {

struct ModelStateLog {
  const AdamW& optimizer;                    // what it updates (this rank's pieces), its state
  models::ModelTensors& model;               // this rank's model parts
  const distributed::MeshContext& parallel;  // their placements and the degrees
  const lora::LoraSetup* lora = nullptr;
  bool staged = false;  // pipeline stages: the share is of every stage's tensors
  std::string stages;   // "; stage k of n ..." for each stage held, or ""
};

// "[titan] rank r of w holds X MiB of parameters, ...".
std::string model_state_line(const ModelStateLog& log);

}  // namespace titan::train
