// The data loader's settings from a trainer config, and what a batch gives the model: one place,
// so training, validation and evaluation pack their batches the same way.
#pragma once

#include <cstdint>

#include "titan/config/trainer_config.h"
#include "titan/data/data_loader.h"
#include "titan/models/model.h"

namespace titan::train {

// training.* batch shape, text field, document masking, shuffling (from training.seed) and
// prefetching. Every rank reads the whole stream and keeps its own rows: the caller sets
// row_rank / row_ranks (the trainer's "batch" ranks, data_loader.h).
data::LoaderOptions loader_options(const config::TrainerConfig& cfg, int32_t eos_id);

// Batches per optimizer step and rank (gradient accumulation): training.global_batch_size over
// local_batch_size x the ranks that read different rows (`dp_degree`); 1 when it is unset.
int64_t micro_batches_per_step(const config::TrainingConfig& t, int64_t dp_degree);

// The batch's document layout on `device` (undefined tensors without document masking).
models::PackedDocuments packed_documents(const data::Batch& batch, at::Device device);

}  // namespace titan::train
