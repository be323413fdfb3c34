// The pipeline schedules titan runs (parallelism.pipeline_parallel_schedule, torchtitan's and
// PyTorch's names) and what sets them apart: how many stages each rank holds, where the stages
// lie (loop: rank r holds r, r + pp, ...; V: rank r holds r and 2 pp - 1 - r) and whether the
// backward is split into an input-gradient and a weight-gradient part (zero bubble).
// Torch-free.
#pragma once

#include <cstdint>
#include <string>

namespace titan::distributed::pipeline {

enum class ScheduleKind { kGPipe, k1F1B, kInterleaved1F1B, kInterleavedZeroBubble, kZBVZeroBubble };

// Case-insensitive, as torchtitan's get_schedule_class; throws naming the value (with a
// did-you-mean) otherwise.
ScheduleKind parse_schedule(const std::string& name);
std::string schedule_name(ScheduleKind kind);

// GPipe and 1F1B run one stage per rank; the others at least two.
bool single_stage(ScheduleKind kind);
// ZBVZeroBubble: exactly two stages per rank, in a V.
bool v_placement(ScheduleKind kind);
// The zero-bubble schedules: backward as I (input gradient) then W (weight gradient).
bool splits_backward(ScheduleKind kind);

}  // namespace titan::distributed::pipeline
