// The preference loader's settings from a trainer config (training.objective dpo): pairs per
// micro-batch (training.local_batch_size), dpo.max_length and truncation_mode, shuffling from
// training.seed, prefetching, the rows' padding for sequence and context parallelism, and from
// the tokenizer folder the eos text TRL appends to text completions (tokenizer_config.json's
// eos_token), the pad id and the chat template (loaded when the first conversational record is
// read). One place, so training, evaluation and
// check-data read pairs alike.
#pragma once

#include <cstdint>

#include "titan/config/trainer_config.h"
#include "titan/data/preference_loader.h"
#include "titan/data/tokenizer/tokenizer.h"

namespace titan::train {

// Every rank reads the whole global batch and keeps its own pairs: the caller sets row_rank /
// row_ranks (the trainer's "batch" ranks).
data::PreferenceLoaderOptions preference_loader_options(const config::TrainerConfig& cfg,
                                                        const data::Tokenizer& tokenizer);

}  // namespace titan::train
