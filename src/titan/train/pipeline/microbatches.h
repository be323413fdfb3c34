// A local batch cut into the pipeline's microbatches: consecutive rows, every tensor of the
// batch (inputs, labels, and the document layout when there is one) alike.
#pragma once

#include <vector>

#include "titan/data/data_loader.h"

namespace titan::train {

// `count` microbatches of batch.inputs.size(0) / count rows each; throws when they do not divide.
std::vector<data::Batch> split_microbatches(const data::Batch& batch, int64_t count);

}  // namespace titan::train
