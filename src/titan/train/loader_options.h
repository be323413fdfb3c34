// The data loader's settings from a trainer config, and what a batch gives the model: one place,
// so training, validation and evaluation pack their batches the same way.
#pragma once

#include <cstdint>

#include "titan/config/trainer_config.h"
#include "titan/data/data_loader.h"
#include "titan/models/model.h"

namespace titan::train {

// training.* batch shape, text field, document masking, shuffling (from training.seed) and
// prefetching; dp_rank/dp_world left at one rank (every rank reads the whole stream and keeps
// its own rows, see Trainer::next_local_batch).
data::LoaderOptions loader_options(const config::TrainerConfig& cfg, int32_t eos_id);

// The batch's document layout on `device` (undefined tensors without document masking).
models::PackedDocuments packed_documents(const data::Batch& batch, at::Device device);

}  // namespace titan::train
