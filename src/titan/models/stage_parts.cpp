#include "titan/models/stage_parts.h"

#include <algorithm>

#include "titan/common/error.h"

namespace titan::models {

std::vector<StageParts> split_layers(int64_t layers, int64_t stages, int64_t layers_per_stage,
                                     int64_t first_fewer, int64_t last_fewer) {
  TITAN_CHECK(stages >= 1, "pipeline: ", stages, " stages");
  TITAN_CHECK(first_fewer >= 0 && last_fewer >= 0,
              "pipeline: the first and last stages cannot hold more layers than the others");
  std::vector<int64_t> counts(stages);
  if (layers_per_stage > 0) {
    for (int64_t s = 0; s < stages; ++s) counts[s] = layers_per_stage;
    counts.front() -= first_fewer;
    counts.back() -= stages > 1 ? last_fewer : 0;
    int64_t total = 0;
    for (int64_t c : counts) total += c;
    TITAN_CHECK(total == layers &&
                    std::all_of(counts.begin(), counts.end(), [](int64_t c) { return c >= 0; }),
                "pipeline: ", stages, " stages of ", layers_per_stage, " layers (the first ",
                first_fewer, " fewer, the last ", last_fewer, " fewer) hold ", total,
                " layers, but the model has ", layers);
  } else {
    // Even, with the first and last stages given `first_fewer` / `last_fewer` fewer where the
    // layers allow; the remainder goes to the middle stages first.
    const int64_t effective = layers + first_fewer + (stages > 1 ? last_fewer : 0);
    const int64_t base = effective / stages, extra = effective % stages;
    for (int64_t s = 0; s < stages; ++s) counts[s] = base;
    for (int64_t e = 0; e < extra; ++e) counts[stages > 2 ? 1 + e % (stages - 2) : e] += 1;
    counts.front() -= first_fewer;
    if (stages > 1) counts.back() -= last_fewer;
    TITAN_CHECK(std::all_of(counts.begin(), counts.end(), [](int64_t c) { return c >= 0; }),
                "pipeline: ", layers, " layers cannot be spread over ", stages,
                " stages with the first ", first_fewer, " and the last ", last_fewer, " fewer");
  }
  std::vector<StageParts> out;
  int64_t next = 0;
  for (int64_t s = 0; s < stages; ++s) {
    StageParts p;
    p.first_layer = next;
    p.end_layer = next + counts[s];
    p.embedding = s == 0;
    p.head = s == stages - 1;
    TITAN_CHECK(counts[s] > 0 || p.embedding || p.head, "pipeline: stage ", s, " of ", stages,
                " would hold no layer (", layers, " layers)");
    next = p.end_layer;
    out.push_back(p);
  }
  return out;
}

}  // namespace titan::models
