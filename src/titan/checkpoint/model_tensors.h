// A model's checkpointed tensors (parameters then buffers, by native name), and copying a set
// of such tensors back into a model.
#pragma once

#include <string>

#include "titan/common/named_tensors.h"
#include "titan/models/model.h"

namespace titan::checkpoint {

// Parameters then buffers, the live tensors (copy before modifying).
NamedTensors model_tensors(models::ModelTensors& model);

// Copies `tensors` into the model's parameters/buffers by native name (no grad), checking that
// every name exists with the same shape and none is missing; throws titan::Error naming
// `source` and the first problem, before anything is modified.
void load_into_model(models::ModelTensors& model, const NamedTensors& tensors,
                     const std::string& source);

// The same into an explicit list of the model's tensors (a LoRA checkpoint: the adapters and
// buffers only).
void load_into(const NamedTensors& targets, const NamedTensors& tensors, const std::string& source);

}  // namespace titan::checkpoint
