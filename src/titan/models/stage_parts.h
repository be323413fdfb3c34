// The parts of a decoder one pipeline stage holds (docs/distributed.md, pipeline parallelism):
// a run of consecutive blocks, and the embedding on the first stage, the final norm and head on
// the last. ModelSpec::pipeline keeps them in a built model; split_layers decides them.
#pragma once

#include <cstdint>
#include <vector>

namespace titan::models {

struct StageParts {
  int64_t first_layer = 0;
  int64_t end_layer = -1;  // one past the last; -1: through the last layer
  bool embedding = true;   // the first stage
  bool head = true;        // the last stage: the final norm (and the output projection)
};

// The parts of each of `stages` stages over `layers` blocks. With `layers_per_stage` > 0 every
// stage holds that many blocks except the first and the last, which hold that many less
// `first_fewer` and `last_fewer` (they also hold the embedding and the head); with 0 the
// blocks are spread as evenly as that allows. Throws titan::Error naming the numbers when they
// do not split (a stage with no block and no embedding or head, or blocks left over).
std::vector<StageParts> split_layers(int64_t layers, int64_t stages, int64_t layers_per_stage = 0,
                                     int64_t first_fewer = 0, int64_t last_fewer = 0);

}  // namespace titan::models
