#include "titan/distributed/pipeline/stage_placement.h"

#include <algorithm>

#include "titan/common/error.h"

namespace titan::distributed::pipeline {

int64_t StagePlacement::rank_of(int64_t stage) const {
  TITAN_CHECK(stage >= 0 && stage < stages, "pipeline: no stage ", stage, " of ", stages);
  if (!v) return stage % ranks;
  return stage < ranks ? stage : 2 * ranks - 1 - stage;
}

std::vector<int64_t> StagePlacement::stages_of(int64_t rank) const {
  std::vector<int64_t> out;
  for (int64_t s = 0; s < stages; ++s)
    if (rank_of(s) == rank) out.push_back(s);
  return out;
}

}  // namespace titan::distributed::pipeline
