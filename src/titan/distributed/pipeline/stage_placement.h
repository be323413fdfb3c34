// Which pipeline rank holds each stage (PyTorch's generate_stage_to_rank_mapping): in a loop,
// rank r holds stages r, r + ranks, r + 2 ranks, ...; in a V (ZBVZeroBubble) rank r holds r
// and 2 ranks - 1 - r, so that rank 0 holds both the first and the last stage. Torch-free.
#pragma once

#include <cstdint>
#include <vector>

namespace titan::distributed::pipeline {

struct StagePlacement {
  int64_t ranks = 1;
  int64_t stages = 1;  // a multiple of ranks
  bool v = false;

  int64_t rank_of(int64_t stage) const;
  // The stages `rank` holds, ascending.
  std::vector<int64_t> stages_of(int64_t rank) const;
};

}  // namespace titan::distributed::pipeline
