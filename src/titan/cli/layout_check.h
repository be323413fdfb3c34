// The layout dry run of `titan configs --print` (with WORLD_SIZE or --nproc-per-node): every
// rule training puts on the parallelism degrees, checked against the model the config builds
// (on the meta device: no memory) before any launch: the mesh over the world, the heads, MLP
// width and experts against tp and ep, seq_len against cp (and tp with sequence parallelism),
// the pipeline's stages, microbatches and schedule against the model (tied embeddings, LoRA),
// and the global batch against the data-parallel ranks.
#pragma once

#include <string>
#include <vector>

#include "titan/config/trainer_config.h"
#include "titan/distributed/parallel_dims.h"

namespace titan::cli {

// One line per rule that applies, saying what was checked; throws the titan::Error training
// would stop with.
std::vector<std::string> layout_check(const config::TrainerConfig& cfg,
                                      const distributed::ParallelDims& dims);

}  // namespace titan::cli
