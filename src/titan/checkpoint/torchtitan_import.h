// Opening a torchtitan checkpoint (torchtitan_checkpoint.h) for a built model: checked against
// the whole model (every stage's tensors at their global shapes) before anything is read. The
// trainer restores its parts from it (train/state/torchtitan_part_reader.h).
#pragma once

#include <string>
#include <vector>

#include "titan/checkpoint/tensor_layout.h"
#include "titan/checkpoint/torchtitan_checkpoint.h"
#include "titan/models/model.h"

namespace titan::checkpoint {

// `dir` opened against `model`'s whole tensors (with a pipeline, every stage's): throws when
// it is not a torchtitan checkpoint of this model.
TorchtitanCheckpointReader open_torchtitan_checkpoint(models::ModelTensors& model,
                                                      const std::string& dir,
                                                      const std::string& model_description,
                                                      const TensorLayout& layout);

}  // namespace titan::checkpoint
