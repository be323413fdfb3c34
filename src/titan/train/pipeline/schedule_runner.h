// Runs one rank's lowered pipeline schedule (distributed/pipeline/lower_schedule.h) over a
// batch's microbatches: each forward and backward on its local stage (pipeline_stage.h), each
// transfer over the pp group, receives posted where the schedule places them and waited for
// just before the computation that needs them, sends waited for at the end. Activations and
// gradients have the shape every rank knows from the config, so no shape travels; what the
// stages carry (models/model.h, StageOutput::carried) travels beside them, in the shapes the
// stages declare. Stages of one rank hand each other their tensors directly (the V of
// ZBVZeroBubble).
//
// The time spent waiting for receives (and for the last sends) is the pipeline's bubble as this
// rank sees it (bench/pipeline_schedules.py reads it).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <tuple>
#include <vector>

#include "titan/distributed/group.h"
#include "titan/distributed/pipeline/pipeline_action.h"
#include "titan/distributed/pipeline/stage_placement.h"
#include "titan/train/pipeline/pipeline_stage.h"

namespace titan::train {

// What crosses between stages: activations [microbatch rows, sequence, hidden] (the sequence
// split over tp under sequence parallelism) in the compute dtype; their gradients alike.
struct StageTransfer {
  std::vector<int64_t> shape;
  at::TensorOptions options;
};

class ScheduleRunner {
 public:
  // Around each backward action (B, I, W): before, whether it is this rank's last of the step
  // (data parallelism finishes its reductions then); after, the same.
  struct BackwardHooks {
    std::function<void(bool last)> before, after;
  };

  // `stages`: this rank's, in the placement's order; `group`: the pp group (member i is
  // pipeline rank i). All must outlive the runner.
  ScheduleRunner(std::vector<PipelineStage*> stages,
                 const distributed::pipeline::StagePlacement& placement, distributed::Group& group,
                 StageTransfer transfer);

  // Runs `actions` over `microbatches`. `last_round`: the step's last batch (its final backward
  // is the step's last).
  void run(const std::vector<distributed::pipeline::Action>& actions,
           const std::vector<data::Batch>& microbatches, const BackwardHooks& hooks,
           bool last_round);

  // Seconds spent waiting for transfers since the last call, and in run() altogether.
  std::pair<double, double> take_times();

 private:
  struct Incoming {
    at::Tensor tensor;
    std::vector<at::Tensor> carried;
    std::vector<distributed::Group::Pending> done;
  };
  PipelineStage& stage(int64_t index);
  bool local(int64_t index) const;
  void receive(const distributed::pipeline::Action& action, bool forward);
  Incoming take(int64_t stage, int64_t microbatch, bool forward);
  void send(int64_t to_stage, const at::Tensor& tensor, const std::vector<at::Tensor>& carried);
  void wait(distributed::Group::Pending& pending);

  std::map<int64_t, PipelineStage*> stages_;
  distributed::pipeline::StagePlacement placement_;
  distributed::Group& group_;
  StageTransfer transfer_;
  std::map<std::tuple<int64_t, int64_t, bool>, Incoming> incoming_;  // (stage, mb, forward)
  std::vector<distributed::Group::Pending> sending_;
  double waited_ = 0, ran_ = 0;
};

}  // namespace titan::train
