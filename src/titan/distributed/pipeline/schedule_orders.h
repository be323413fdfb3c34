// The compute order of every rank of a pipeline schedule: which forwards and backwards each
// rank runs, in which order (no transfers yet: lower_schedule.h adds them). Each generator is
// PyTorch's (torch.distributed.pipelining.schedules, torch 2.11), with its idle slots left out;
// docs/distributed.md draws them and tests/unit/distributed/pipeline_schedule_test.cpp checks
// them against PyTorch's own lists. Torch-free.
#pragma once

#include <cstdint>

#include "titan/distributed/pipeline/pipeline_action.h"
#include "titan/distributed/pipeline/schedule_kind.h"

namespace titan::distributed::pipeline {

// GPipe: every forward, then every backward (one stage per rank).
RankActions gpipe_order(int64_t ranks, int64_t microbatches);
// 1F1B: min(n, ranks - rank) forwards, then one backward and one forward in turn, then the
// remaining backwards (one stage per rank).
RankActions one_f_one_b_order(int64_t ranks, int64_t microbatches);
// Interleaved 1F1B (Megatron's, with PyTorch's rounds of microbatches) over `stages_per_rank`
// looped stages per rank; with `zero_bubble` PyTorch's InterleavedZeroBubble (ZB1P): the
// backward split into I and W, the W of rank r's oldest backward delayed by r steps.
RankActions interleaved_order(int64_t ranks, int64_t stages_per_rank, int64_t microbatches,
                              bool zero_bubble);
// ZBV zero bubble: two stages per rank in a V (rank r holds r and 2 ranks - 1 - r).
RankActions zbv_order(int64_t ranks, int64_t microbatches);

// The order of `kind`; throws naming the numbers when the schedule cannot run them (as
// PyTorch's classes refuse them).
RankActions compute_order(ScheduleKind kind, int64_t ranks, int64_t stages_per_rank,
                          int64_t microbatches);

// The same list with its backward actions (B, I, W) removed: the forward-only schedule of
// validation, in the training schedule's forward order.
RankActions forward_only(const RankActions& order);

}  // namespace titan::distributed::pipeline
