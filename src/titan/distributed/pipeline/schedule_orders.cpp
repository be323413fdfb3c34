#include "titan/distributed/pipeline/schedule_orders.h"

#include <algorithm>
#include <map>

#include "titan/common/error.h"

namespace titan::distributed::pipeline {
namespace {

using T = ActionType;

// The next microbatch of a stage, counted per stage.
int64_t next(std::map<int64_t, int64_t>& counter, int64_t stage) { return counter[stage]++; }

}  // namespace

RankActions gpipe_order(int64_t ranks, int64_t microbatches) {
  RankActions out(static_cast<size_t>(ranks));
  for (int64_t r = 0; r < ranks; ++r) {
    for (int64_t m = 0; m < microbatches; ++m) out[r].push_back({r, T::kForward, m});
    for (int64_t m = 0; m < microbatches; ++m) out[r].push_back({r, T::kBackward, m});
  }
  return out;
}

RankActions one_f_one_b_order(int64_t ranks, int64_t microbatches) {
  RankActions out(static_cast<size_t>(ranks));
  for (int64_t r = 0; r < ranks; ++r) {
    // PyTorch's warmup is ranks - rank forwards, one more than Megatron's.
    const int64_t warmup = std::min(microbatches, ranks - r);
    int64_t f = 0, b = 0;
    for (; f < warmup; ++f) out[r].push_back({r, T::kForward, f});
    while (b < microbatches) {
      out[r].push_back({r, T::kBackward, b++});
      if (f < microbatches) out[r].push_back({r, T::kForward, f++});
    }
  }
  return out;
}

RankActions interleaved_order(int64_t ranks, int64_t stages_per_rank, int64_t microbatches,
                              bool zero_bubble) {
  const int64_t rounds = std::max<int64_t>(1, microbatches / ranks);
  const int64_t per_round = microbatches / rounds;
  const int64_t spr = stages_per_rank;
  RankActions out(static_cast<size_t>(ranks));
  for (int64_t r = 0; r < ranks; ++r) {
    // Forwards before the first backward: the other local stages' round, and two (one with
    // zero bubble) per rank still to reach the last stage.
    const int64_t factor = zero_bubble ? 1 : 2;
    const int64_t warmup =
        std::min((spr - 1) * per_round + factor * (ranks - 1 - r), microbatches * spr);
    const int64_t total = microbatches * spr;
    const int64_t fwd_bwd = total - warmup;
    auto forward_stage = [&](int64_t op) { return ((op / per_round) % spr) * ranks + r; };
    auto backward_stage = [&](int64_t op) {
      return (spr - 1 - ((op - warmup) / per_round) % spr) * ranks + r;
    };
    std::map<int64_t, int64_t> forwards, backwards, weights;
    std::vector<int64_t> backward_ops;
    size_t weight_count = 0;
    const T backward = zero_bubble ? T::kBackwardInput : T::kBackward;
    auto add_weight = [&] {
      const int64_t s = backward_stage(backward_ops[weight_count++]);
      out[r].push_back({s, T::kBackwardWeight, next(weights, s)});
    };
    for (int64_t op = 0; op < warmup + fwd_bwd + warmup; ++op) {
      if (op < warmup + fwd_bwd) {
        const int64_t s = forward_stage(op);
        out[r].push_back({s, T::kForward, next(forwards, s)});
      }
      if (op < warmup) continue;
      const int64_t s = backward_stage(op);
      out[r].push_back({s, backward, next(backwards, s)});
      backward_ops.push_back(op);
      // ZB1P: after `r` steady backwards, each is followed by the oldest one's W.
      if (zero_bubble && op - warmup >= r) add_weight();
    }
    while (zero_bubble && weight_count < backward_ops.size()) add_weight();
  }
  return out;
}

RankActions zbv_order(int64_t ranks, int64_t microbatches) {
  // PyTorch fills the V for at least 2 ranks - 1 microbatches, then drops those beyond n.
  const int64_t n = std::max(2 * ranks - 1, microbatches);
  RankActions out(static_cast<size_t>(ranks));
  for (int64_t r = 0; r < ranks; ++r) {
    const int64_t c0 = r, c1 = 2 * ranks - 1 - r;
    std::vector<Action>& ops = out[r];
    int64_t f0 = 0, f1 = 0, b0 = 0, b1 = 0;
    auto forward = [&](int64_t s, int64_t& count) { ops.push_back({s, T::kForward, count++}); };
    auto input = [&](int64_t s, int64_t& count) { ops.push_back({s, T::kBackwardInput, count++}); };
    auto weight = [&](int64_t s, int64_t m) { ops.push_back({s, T::kBackwardWeight, m}); };
    auto input_and_weight = [&](int64_t s, int64_t& count) {
      ops.push_back({s, T::kBackwardInput, count});
      ops.push_back({s, T::kBackwardWeight, count++});
    };
    for (int64_t i = 0; i < 2 * (ranks - r) - 1; ++i) forward(c0, f0);
    for (int64_t i = 0; i < r; ++i) {
      forward(c1, f1);
      forward(c0, f0);
    }
    for (int64_t i = 0; i < ranks - r; ++i) {
      forward(c1, f1);
      input_and_weight(c1, b1);
    }
    while (f1 < f0 || f0 < n) {
      if (f0 < n) forward(c0, f0);
      input_and_weight(c0, b0);
      forward(c1, f1);
      input_and_weight(c1, b1);
    }
    int64_t w0 = b0, w1 = b1;
    for (int64_t i = 0; i < r; ++i) {
      input(c0, b0);
      input(c1, b1);
    }
    for (int64_t i = 0; i < ranks - r; ++i) {
      input(c0, b0);
      weight(c0, w0++);
    }
    while (w1 < b1) weight(c1, w1++);
    while (w0 < b0) weight(c0, w0++);
    ops.erase(std::remove_if(ops.begin(), ops.end(),
                             [&](const Action& a) { return a.microbatch >= microbatches; }),
              ops.end());
  }
  return out;
}

RankActions compute_order(ScheduleKind kind, int64_t ranks, int64_t stages_per_rank,
                          int64_t microbatches) {
  TITAN_CHECK(ranks >= 1 && microbatches >= 1 && stages_per_rank >= 1, "pipeline: ", ranks,
              " ranks, ", stages_per_rank, " stages per rank, ", microbatches, " microbatches");
  const std::string name = schedule_name(kind);
  switch (kind) {
    case ScheduleKind::kGPipe:
      return gpipe_order(ranks, microbatches);
    case ScheduleKind::k1F1B:
      TITAN_CHECK(microbatches >= ranks, "parallelism.pipeline_parallel_schedule = ", name, ": ",
                  microbatches,
                  " microbatches (training.local_batch_size / "
                  "parallelism.pipeline_parallel_microbatch_size) must be at least the number "
                  "of stages, ",
                  ranks);
      return one_f_one_b_order(ranks, microbatches);
    case ScheduleKind::kInterleaved1F1B:
    case ScheduleKind::kInterleavedZeroBubble: {
      const int64_t rounds = std::max<int64_t>(1, microbatches / ranks);
      TITAN_CHECK(microbatches % rounds == 0, "parallelism.pipeline_parallel_schedule = ", name,
                  ": ", microbatches,
                  " microbatches (training.local_batch_size / "
                  "parallelism.pipeline_parallel_microbatch_size) must be a multiple of the ",
                  rounds, " rounds of ", ranks,
                  " ranks they make (fewer than the ranks, or a multiple of the rounds)");
      return interleaved_order(ranks, stages_per_rank, microbatches,
                               kind == ScheduleKind::kInterleavedZeroBubble);
    }
    case ScheduleKind::kZBVZeroBubble:
      TITAN_CHECK(stages_per_rank == 2, "parallelism.pipeline_parallel_schedule = ", name,
                  " needs exactly 2 stages per rank, not ", stages_per_rank);
      return zbv_order(ranks, microbatches);
  }
  fail("pipeline: unknown schedule");
}

RankActions forward_only(const RankActions& order) {
  RankActions out = order;
  for (auto& ops : out)
    ops.erase(std::remove_if(ops.begin(), ops.end(),
                             [](const Action& a) {
                               return a.type == T::kBackward || a.type == T::kBackwardInput ||
                                      a.type == T::kBackwardWeight;
                             }),
              ops.end());
  return out;
}

}  // namespace titan::distributed::pipeline
