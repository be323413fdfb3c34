// The pipeline schedules (distributed/pipeline/): each rank's compute order against the lists
// PyTorch's own schedule classes give (torch 2.11, torch.distributed.pipelining.schedules:
// GPipe and 1F1B as their _step_microbatches loops run, the others their pipeline_order with
// the idle slots left out), the lowering with sends and receives against
// pipeline_order_with_comms, the invariants every lowered schedule keeps, and the plan's errors.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "../error_of.h"
#include "titan/distributed/pipeline/lower_schedule.h"
#include "titan/distributed/pipeline/pipeline_plan.h"
#include "titan/distributed/pipeline/schedule_orders.h"

namespace titan::distributed::pipeline {
namespace {

using titan::testing::error_of;
using Lists = std::vector<std::string>;

Lists strings(const RankActions& actions, bool keep_reduce_grad = true) {
  Lists out;
  for (const auto& ops : actions) {
    std::vector<Action> kept;
    for (const Action& a : ops)
      if (keep_reduce_grad || a.type != ActionType::kReduceGrad) kept.push_back(a);
    out.push_back(to_string(kept));
  }
  return out;
}

StagePlacement loop(int64_t ranks, int64_t stages_per_rank) {
  return {ranks, ranks * stages_per_rank, false};
}
StagePlacement vee(int64_t ranks) { return {ranks, 2 * ranks, true}; }

TEST(PipelineSchedule, GPipeAnd1F1BRunAsPyTorchsLoops) {
  EXPECT_EQ(strings(gpipe_order(2, 4)),
            (Lists{"0F0 0F1 0F2 0F3 0B0 0B1 0B2 0B3", "1F0 1F1 1F2 1F3 1B0 1B1 1B2 1B3"}));
  EXPECT_EQ(strings(one_f_one_b_order(2, 4)),
            (Lists{"0F0 0F1 0B0 0F2 0B1 0F3 0B2 0B3", "1F0 1B0 1F1 1B1 1F2 1B2 1F3 1B3"}));
  EXPECT_EQ(strings(one_f_one_b_order(4, 8)),
            (Lists{"0F0 0F1 0F2 0F3 0B0 0F4 0B1 0F5 0B2 0F6 0B3 0F7 0B4 0B5 0B6 0B7",
                   "1F0 1F1 1F2 1B0 1F3 1B1 1F4 1B2 1F5 1B3 1F6 1B4 1F7 1B5 1B6 1B7",
                   "2F0 2F1 2B0 2F2 2B1 2F3 2B2 2F4 2B3 2F5 2B4 2F6 2B5 2F7 2B6 2B7",
                   "3F0 3B0 3F1 3B1 3F2 3B2 3F3 3B3 3F4 3B4 3F5 3B5 3F6 3B6 3F7 3B7"}));
}

TEST(PipelineSchedule, InterleavedOrdersArePyTorchs) {
  EXPECT_EQ(strings(interleaved_order(2, 2, 4, false)),
            (Lists{"0F0 0F1 2F0 2F1 0F2 2B0 0F3 2B1 2F2 0B0 2F3 0B1 2B2 2B3 0B2 0B3",
                   "1F0 1F1 3F0 3B0 3F1 3B1 1F2 1B0 1F3 1B1 3F2 3B2 3F3 3B3 1B2 1B3"}));
  EXPECT_EQ(strings(interleaved_order(4, 2, 8, false)),
            (Lists{"0F0 0F1 0F2 0F3 4F0 4F1 4F2 4F3 0F4 0F5 0F6 4B0 0F7 4B1 4F4 4B2 4F5 4B3 4F6 "
                   "0B0 4F7 0B1 0B2 0B3 4B4 4B5 4B6 4B7 0B4 0B5 0B6 0B7",
                   "1F0 1F1 1F2 1F3 5F0 5F1 5F2 5F3 1F4 5B0 1F5 5B1 1F6 5B2 1F7 5B3 5F4 1B0 5F5 "
                   "1B1 5F6 1B2 5F7 1B3 5B4 5B5 5B6 5B7 1B4 1B5 1B6 1B7",
                   "2F0 2F1 2F2 2F3 6F0 6F1 6F2 6B0 6F3 6B1 2F4 6B2 2F5 6B3 2F6 2B0 2F7 2B1 6F4 "
                   "2B2 6F5 2B3 6F6 6B4 6F7 6B5 6B6 6B7 2B4 2B5 2B6 2B7",
                   "3F0 3F1 3F2 3F3 7F0 7B0 7F1 7B1 7F2 7B2 7F3 7B3 3F4 3B0 3F5 3B1 3F6 3B2 3F7 "
                   "3B3 7F4 7B4 7F5 7B5 7F6 7B6 7F7 7B7 3B4 3B5 3B6 3B7"}));
  // Six microbatches over four ranks: one round of six (PyTorch accepts it; nine it refuses).
  EXPECT_EQ(strings(interleaved_order(4, 2, 6, false))[3],
            "3F0 3F1 3F2 3F3 3F4 3F5 7F0 7B0 7F1 7B1 7F2 7B2 7F3 7B3 7F4 7B4 7F5 7B5 3B0 3B1 3B2 "
            "3B3 3B4 3B5");
}

TEST(PipelineSchedule, ZeroBubbleOrdersArePyTorchs) {
  EXPECT_EQ(strings(interleaved_order(2, 2, 4, true)),
            (Lists{"0F0 0F1 2F0 2F1 2I0 2W0 0F2 2I1 2W1 0F3 0I0 0W0 2F2 0I1 0W1 2F3 2I2 2W2 2I3 "
                   "2W3 0I2 0W2 0I3 0W3",
                   "1F0 1F1 3F0 3I0 3F1 3I1 3W0 1F2 1I0 3W1 1F3 1I1 1W0 3F2 3I2 1W1 3F3 3I3 3W2 "
                   "1I2 3W3 1I3 1W2 1W3"}));
  EXPECT_EQ(strings(interleaved_order(4, 2, 8, true))[1],
            "1F0 1F1 1F2 1F3 5F0 5F1 5F2 5I0 5F3 5I1 5W0 1F4 5I2 5W1 1F5 5I3 5W2 1F6 1I0 5W3 1F7 "
            "1I1 1W0 5F4 1I2 1W1 5F5 1I3 1W2 5F6 5I4 1W3 5F7 5I5 5W4 5I6 5W5 5I7 5W6 1I4 5W7 1I5 "
            "1W4 1I6 1W5 1I7 1W6 1W7");
  EXPECT_EQ(strings(zbv_order(2, 4)),
            (Lists{"0F0 0F1 0F2 3F0 3I0 3W0 3F1 3I1 3W1 0F3 0I0 0W0 3F2 3I2 3W2 0I1 0W1 3F3 3I3 "
                   "3W3 0I2 0W2 0I3 0W3",
                   "1F0 2F0 1F1 2F1 2I0 2W0 1F2 1I0 1W0 2F2 2I1 2W1 1F3 1I1 1W1 2F3 2I2 2W2 1I2 "
                   "2I3 1I3 1W2 2W3 1W3"}));
  EXPECT_EQ(strings(zbv_order(2, 2)), (Lists{"0F0 0F1 3F0 3I0 3W0 3F1 3I1 3W1 0I0 0W0 0I1 0W1",
                                             "1F0 2F0 1F1 2F1 2I0 2W0 1I0 1W0 2I1 2W1 1I1 1W1"}));
  EXPECT_EQ(strings(zbv_order(4, 8))[2],
            "2F0 2F1 2F2 5F0 2F3 5F1 2F4 5F2 5I0 5W0 5F3 5I1 5W1 2F5 2I0 2W0 5F4 5I2 5W2 2F6 2I1 "
            "2W1 5F5 5I3 5W3 2F7 2I2 2W2 5F6 5I4 5W4 2I3 2W3 5F7 5I5 5W5 2I4 5I6 2I5 5I7 2I6 2W4 "
            "2I7 2W5 5W6 5W7 2W6 2W7");
}

TEST(PipelineSchedule, LoweringPlacesTransfersAsPyTorchDoes) {
  EXPECT_EQ(strings(lower_schedule(gpipe_order(2, 4), loop(2, 1), 4), false),
            (Lists{"0F0 0SEND_F0 0F1 0SEND_F1 0F2 0SEND_F2 0F3 0SEND_F3 0RECV_B0 0B0 0RECV_B1 0B1 "
                   "0RECV_B2 0B2 0RECV_B3 0B3",
                   "1RECV_F0 1F0 1RECV_F1 1F1 1RECV_F2 1F2 1RECV_F3 1F3 1B0 1SEND_B0 1B1 1SEND_B1 "
                   "1B2 1SEND_B2 1B3 1SEND_B3"}));
  EXPECT_EQ(strings(lower_schedule(one_f_one_b_order(2, 4), loop(2, 1), 4), false),
            (Lists{"0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0F2 0SEND_F2 0RECV_B1 0B1 0F3 0SEND_F3 "
                   "0RECV_B2 0B2 0RECV_B3 0B3",
                   "1RECV_F0 1F0 1RECV_F1 1B0 1SEND_B0 1F1 1RECV_F2 1B1 1SEND_B1 1F2 1RECV_F3 1B2 "
                   "1SEND_B2 1F3 1B3 1SEND_B3"}));
  EXPECT_EQ(
      strings(lower_schedule(interleaved_order(2, 2, 4, false), loop(2, 2), 4)),
      (Lists{"0F0 0SEND_F0 2RECV_F0 0F1 0SEND_F1 2RECV_F1 2F0 2SEND_F0 2F1 2SEND_F1 2RECV_B0 0F2 "
             "0SEND_F2 2B0 2SEND_B0 2RECV_B1 0F3 0SEND_F3 2RECV_F2 2B1 2SEND_B1 0RECV_B0 2F2 "
             "2SEND_F2 2RECV_F3 0B0 0RECV_B1 2F3 2SEND_F3 0B1 2RECV_B2 2B2 2SEND_B2 2RECV_B3 2B3 "
             "2SEND_B3 2REDUCE_GRAD 0RECV_B2 0B2 0RECV_B3 0B3 0REDUCE_GRAD",
             "1RECV_F0 1F0 1SEND_F0 1RECV_F1 1F1 1SEND_F1 3RECV_F0 3F0 3RECV_F1 3B0 3SEND_B0 "
             "1RECV_F2 3F1 1RECV_B0 3B1 3SEND_B1 1RECV_F3 1F2 1SEND_F2 1RECV_B1 1B0 1SEND_B0 "
             "3RECV_F2 1F3 1SEND_F3 1B1 1SEND_B1 3RECV_F3 3F2 3B2 3SEND_B2 1RECV_B2 3F3 3B3 "
             "3SEND_B3 1RECV_B3 3REDUCE_GRAD 1B2 1SEND_B2 1B3 1SEND_B3 1REDUCE_GRAD"}));
  // The V: stages 1 and 2 are both on rank 1, which hands the activation over without a send.
  EXPECT_EQ(strings(lower_schedule(zbv_order(2, 4), vee(2), 4)),
            (Lists{"0F0 0SEND_F0 0F1 0SEND_F1 3RECV_F0 0F2 0SEND_F2 3F0 3RECV_F1 3I0 3SEND_B0 3W0 "
                   "3F1 3I1 3SEND_B1 0RECV_B0 3W1 0F3 0SEND_F3 3RECV_F2 0I0 0W0 3F2 3I2 3SEND_B2 "
                   "0RECV_B1 3W2 0I1 3RECV_F3 0W1 3F3 3I3 3SEND_B3 0RECV_B2 3W3 3REDUCE_GRAD "
                   "0RECV_B3 0I2 0W2 0I3 0W3 0REDUCE_GRAD",
                   "1RECV_F0 1F0 1RECV_F1 2F0 2SEND_F0 1RECV_F2 1F1 2F1 2SEND_F1 2RECV_B0 2I0 2W0 "
                   "1F2 2RECV_B1 1I0 1SEND_B0 1W0 1RECV_F3 2F2 2SEND_F2 2I1 2W1 1F3 2RECV_B2 1I1 "
                   "1SEND_B1 1W1 2F3 2SEND_F3 2I2 2W2 2RECV_B3 1I2 1SEND_B2 2I3 1I3 1SEND_B3 1W2 "
                   "2W3 2REDUCE_GRAD 1W3 1REDUCE_GRAD"}));
}

// What every lowered schedule keeps, whatever its shape: each (stage, microbatch) forwarded and
// backwarded once, each after its input arrived; every send matched by a receive on the other
// rank; and between two ranks the transfers in the same order on both sides.
void check_invariants(ScheduleKind kind, int64_t ranks, int64_t spr, int64_t n) {
  const std::string what = schedule_name(kind) + " ranks " + std::to_string(ranks) + " spr " +
                           std::to_string(spr) + " n " + std::to_string(n);
  const StagePlacement placement{ranks, ranks * spr, v_placement(kind)};
  const RankActions lowered = lower_schedule(compute_order(kind, ranks, spr, n), placement, n);
  std::map<std::pair<int64_t, int64_t>, std::vector<std::string>> sent, received;  // (from, to)
  std::map<std::string, int> computed;
  for (int64_t r = 0; r < ranks; ++r) {
    std::set<std::string> seen;
    for (const Action& a : lowered[r]) {
      EXPECT_EQ(placement.rank_of(a.stage), r) << what << " " << a.str();
      seen.insert(a.str());
      const std::string mb = std::to_string(a.microbatch);
      switch (a.type) {
        case ActionType::kForward:
          if (a.stage > 0) {
            EXPECT_TRUE(seen.count(std::to_string(a.stage) + "RECV_F" + mb) ||
                        placement.rank_of(a.stage - 1) == r)
                << what << " " << a.str();
          }
          ++computed["F" + std::to_string(a.stage) + "_" + mb];
          break;
        case ActionType::kBackward:
        case ActionType::kBackwardWeight:
          EXPECT_TRUE(seen.count(std::to_string(a.stage) + "F" + mb)) << what << " " << a.str();
          ++computed["B" + std::to_string(a.stage) + "_" + mb];
          break;
        case ActionType::kSendForward:
          sent[{r, placement.rank_of(a.stage + 1)}].push_back("F" + std::to_string(a.stage + 1) +
                                                              "_" + mb);
          break;
        case ActionType::kSendBackward:
          sent[{r, placement.rank_of(a.stage - 1)}].push_back("B" + std::to_string(a.stage - 1) +
                                                              "_" + mb);
          break;
        case ActionType::kRecvForward:
          received[{placement.rank_of(a.stage - 1), r}].push_back("F" + std::to_string(a.stage) +
                                                                  "_" + mb);
          break;
        case ActionType::kRecvBackward:
          received[{placement.rank_of(a.stage + 1), r}].push_back("B" + std::to_string(a.stage) +
                                                                  "_" + mb);
          break;
        default:
          break;
      }
    }
  }
  EXPECT_EQ(sent, received) << what;
  EXPECT_EQ(static_cast<int64_t>(computed.size()), 2 * ranks * spr * n) << what;
  for (const auto& [key, count] : computed) EXPECT_EQ(count, 1) << what << " " << key;
}

TEST(PipelineSchedule, EveryLoweredScheduleKeepsItsInvariants) {
  for (int64_t ranks : {2, 3, 4}) {
    for (int64_t n : {1, 2, 3, 4, 5, 6, 8, 12}) {
      check_invariants(ScheduleKind::kGPipe, ranks, 1, n);
      if (n >= ranks) check_invariants(ScheduleKind::k1F1B, ranks, 1, n);
      if (n % std::max<int64_t>(1, n / ranks) == 0) {
        for (int64_t spr : {2, 3}) {
          check_invariants(ScheduleKind::kInterleaved1F1B, ranks, spr, n);
          check_invariants(ScheduleKind::kInterleavedZeroBubble, ranks, spr, n);
        }
      }
      check_invariants(ScheduleKind::kZBVZeroBubble, ranks, 2, n);
    }
  }
}

TEST(PipelineSchedule, ValidationRunsTheForwardsAlone) {
  const RankActions lowered =
      lower_schedule(forward_only(interleaved_order(2, 2, 4, false)), loop(2, 2), 4);
  EXPECT_EQ(strings(lowered)[1],
            "1RECV_F0 1F0 1SEND_F0 1RECV_F1 1F1 1SEND_F1 3RECV_F0 3F0 3RECV_F1 3F1 1RECV_F2 1F2 "
            "1SEND_F2 1RECV_F3 1F3 1SEND_F3 3RECV_F2 3F2 3RECV_F3 3F3");
}

TEST(PipelineSchedule, StagesLieInALoopOrAV) {
  EXPECT_EQ(loop(2, 2).stages_of(0), (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(loop(2, 2).stages_of(1), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(vee(2).stages_of(0), (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(vee(2).stages_of(1), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(vee(4).stages_of(1), (std::vector<int64_t>{1, 6}));
}

config::ParallelismConfig parallelism(int64_t pp, const std::string& schedule) {
  config::ParallelismConfig p;
  p.pipeline_parallel_degree = pp;
  p.pipeline_parallel_schedule = schedule;
  return p;
}

TEST(PipelinePlan, StagesLayersAndMicrobatches) {
  // One stage per rank; the first and last hold a layer fewer (the embedding and the head).
  PipelinePlan plan = plan_pipeline(parallelism(2, "1f1b"), 4, 4);
  EXPECT_EQ(plan.schedule, ScheduleKind::k1F1B);
  EXPECT_EQ(plan.stages(), 2);
  EXPECT_EQ(plan.microbatches, 4);
  EXPECT_EQ(plan.describe_stage(0), "stage 0 of 2: the embedding, layers 0-1");
  EXPECT_EQ(plan.describe_stage(1), "stage 1 of 2: layers 2-3, the final norm and head");
  // Two per rank with a multi-stage schedule, in a V with ZBV.
  plan = plan_pipeline(parallelism(2, "ZBVZeroBubble"), 4, 8);
  EXPECT_EQ(plan.stages(), 4);
  EXPECT_TRUE(plan.placement.v);
  EXPECT_EQ(plan.training.size(), 2u);
  // layers_per_stage sets the number of stages: (6 + 1 + 1) / 2 = 4, two per rank.
  config::ParallelismConfig p = parallelism(2, "Interleaved1F1B");
  p.pipeline_parallel_layers_per_stage = 2;
  p.pipeline_parallel_microbatch_size = 2;
  plan = plan_pipeline(p, 4, 6);
  EXPECT_EQ(plan.stages(), 4);
  EXPECT_EQ(plan.microbatches, 2);
  EXPECT_EQ(plan.describe_stage(3), "stage 3 of 4: layer 5, the final norm and head");
}

TEST(PipelinePlan, EachProblemHasItsOwnError) {
  auto message = [](config::ParallelismConfig p, int64_t batch, int64_t layers) {
    return error_of([&] { plan_pipeline(p, batch, layers); });
  };
  EXPECT_NE(message(parallelism(2, "1F1C"), 4, 4).find("did you mean \"1F1B\""), std::string::npos)
      << message(parallelism(2, "1F1C"), 4, 4);
  // Fewer microbatches than stages for 1F1B.
  EXPECT_NE(message(parallelism(2, "1F1B"), 1, 4).find("1 microbatches"), std::string::npos);
  // A batch that does not divide into microbatches.
  config::ParallelismConfig p = parallelism(2, "GPipe");
  p.pipeline_parallel_microbatch_size = 3;
  EXPECT_NE(message(p, 4, 4).find("training.local_batch_size = 4 does not divide"),
            std::string::npos);
  // Interleaved: 9 microbatches over 4 ranks make 2 rounds, which do not divide them.
  EXPECT_NE(message(parallelism(4, "Interleaved1F1B"), 9, 8).find("multiple of the 2 rounds"),
            std::string::npos);
  // Layers that do not split: more stages than layers, embedding and head can fill.
  const std::string layers = message(parallelism(4, "Interleaved1F1B"), 8, 4);
  EXPECT_NE(layers.find("the model's layers do not split"), std::string::npos) << layers;
  // A stage count the ranks do not divide, and single-stage schedules given several.
  p = parallelism(2, "Interleaved1F1B");
  p.pipeline_parallel_layers_per_stage = 2;
  EXPECT_NE(message(p, 4, 3).find("does not divide"), std::string::npos) << message(p, 4, 3);
  p.pipeline_parallel_schedule = "1F1B";
  EXPECT_NE(message(p, 4, 6).find("runs one stage per rank"), std::string::npos);
}

}  // namespace
}  // namespace titan::distributed::pipeline
