// The whole model's parameters for the Hugging Face export under pipeline parallelism, in the
// whole model's order, one at a time: each is gathered within a stage that holds it (the
// layout's collectives over its shards) and broadcast over pp from the first rank that holds
// it, so every rank takes part in every transfer and the coordinator (rank 0, on the first
// stage) writes them all. The export is therefore the same bytes whatever the pipeline.
#pragma once

#include "titan/checkpoint/hf_export.h"
#include "titan/distributed/group.h"
#include "titan/train/pipeline/stage_tensors.h"

namespace titan::train {

// `model` this rank's stages (train/model_parts.h), `holders` who holds what; all must outlive the
// result.
checkpoint::NativeTensors pipeline_parameters(models::ModelTensors& model,
                                              const checkpoint::TensorLayout& layout,
                                              const StageTensors& holders, distributed::Group& pp,
                                              at::Device device);

}  // namespace titan::train
