#include "titan/train/pipeline/schedule_runner.h"

#include "titan/common/error.h"

namespace titan::train {
namespace {

using Clock = std::chrono::steady_clock;
using distributed::pipeline::Action;
using distributed::pipeline::ActionType;

double since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

ScheduleRunner::ScheduleRunner(std::vector<PipelineStage*> stages,
                               const distributed::pipeline::StagePlacement& placement,
                               distributed::Group& group, StageTransfer transfer)
    : placement_(placement), group_(group), transfer_(std::move(transfer)) {
  for (PipelineStage* s : stages) stages_[s->index()] = s;
}

PipelineStage& ScheduleRunner::stage(int64_t index) {
  auto it = stages_.find(index);
  TITAN_CHECK(it != stages_.end(), "pipeline: stage ", index, " is not on this rank");
  return *it->second;
}

bool ScheduleRunner::local(int64_t index) const { return stages_.count(index) > 0; }

void ScheduleRunner::wait(distributed::Group::Pending& pending) {
  const auto start = Clock::now();
  pending.wait();
  waited_ += since(start);
}

void ScheduleRunner::receive(const Action& action, bool forward) {
  PipelineStage& to = stage(action.stage);
  const int64_t from = placement_.rank_of(forward ? action.stage - 1 : action.stage + 1);
  Incoming in;
  in.tensor = at::empty(transfer_.shape, transfer_.options);
  in.done.push_back(group_.recv_async(in.tensor, from));
  for (const std::vector<int64_t>& shape : to.carried_shapes()) {
    in.carried.push_back(at::empty(shape, transfer_.options.dtype(at::kFloat)));
    in.done.push_back(group_.recv_async(in.carried.back(), from));
  }
  incoming_[{action.stage, action.microbatch, forward}] = std::move(in);
}

ScheduleRunner::Incoming ScheduleRunner::take(int64_t stage, int64_t microbatch, bool forward) {
  auto it = incoming_.find({stage, microbatch, forward});
  TITAN_CHECK(it != incoming_.end(), "pipeline: stage ", stage, " waits for the ",
              forward ? "activations" : "gradient", " of microbatch ", microbatch,
              " but no receive was posted for it");
  Incoming in = std::move(it->second);
  incoming_.erase(it);
  for (auto& pending : in.done) wait(pending);
  return in;
}

void ScheduleRunner::send(int64_t to_stage, const at::Tensor& tensor,
                          const std::vector<at::Tensor>& carried) {
  const int64_t to = placement_.rank_of(to_stage);
  TITAN_CHECK(tensor.sizes().vec() == transfer_.shape, "pipeline: sending ", tensor.sizes(),
              " to stage ", to_stage, " where ", at::IntArrayRef(transfer_.shape), " is expected");
  sending_.push_back(group_.send_async(tensor.to(transfer_.options.dtype()), to));
  for (const at::Tensor& t : carried) sending_.push_back(group_.send_async(t, to));
}

void ScheduleRunner::run(const std::vector<Action>& actions,
                         const std::vector<data::Batch>& microbatches, const BackwardHooks& hooks,
                         bool last_round) {
  const auto start = Clock::now();
  // The last backward (B or W) of the step: data parallelism's reductions complete there.
  int64_t last_backward = -1;
  for (size_t i = 0; i < actions.size(); ++i)
    if (actions[i].type == ActionType::kBackward || actions[i].type == ActionType::kBackwardWeight)
      last_backward = static_cast<int64_t>(i);
  for (size_t i = 0; i < actions.size(); ++i) {
    const Action& a = actions[i];
    switch (a.type) {
      case ActionType::kRecvForward:
        receive(a, true);
        break;
      case ActionType::kRecvBackward:
        receive(a, false);
        break;
      case ActionType::kSendForward: {
        PipelineStage& s = stage(a.stage);
        send(a.stage + 1, s.output(a.microbatch), s.carried(a.microbatch));
        break;
      }
      case ActionType::kSendBackward: {
        PipelineStage& s = stage(a.stage);
        send(a.stage - 1, s.input_grad(a.microbatch), s.totals(a.microbatch));
        break;
      }
      case ActionType::kForward: {
        PipelineStage& s = stage(a.stage);
        at::Tensor input;
        std::vector<at::Tensor> carried;
        if (s.first()) {
        } else if (local(a.stage - 1)) {  // handed over on this rank
          input = stage(a.stage - 1).output(a.microbatch);
          carried = stage(a.stage - 1).carried(a.microbatch);
        } else {
          Incoming in = take(a.stage, a.microbatch, true);
          input = in.tensor;
          carried = std::move(in.carried);
        }
        s.forward(a.microbatch, microbatches.at(static_cast<size_t>(a.microbatch)), input, carried);
        break;
      }
      case ActionType::kBackward:
      case ActionType::kBackwardInput:
      case ActionType::kBackwardWeight: {
        PipelineStage& s = stage(a.stage);
        at::Tensor grad;
        std::vector<at::Tensor> totals;
        if (a.type != ActionType::kBackwardWeight && !s.last()) {
          if (local(a.stage + 1)) {
            grad = stage(a.stage + 1).input_grad(a.microbatch);
            totals = stage(a.stage + 1).totals(a.microbatch);
          } else {
            Incoming in = take(a.stage, a.microbatch, false);
            grad = in.tensor;
            totals = std::move(in.carried);
          }
        }
        const bool last = last_round && static_cast<int64_t>(i) == last_backward;
        if (hooks.before) hooks.before(last);
        s.backward(a.microbatch,
                   a.type == ActionType::kBackward        ? PipelineStage::Backward::kFull
                   : a.type == ActionType::kBackwardInput ? PipelineStage::Backward::kInput
                                                          : PipelineStage::Backward::kWeight,
                   grad, totals);
        if (hooks.after) hooks.after(last);
        break;
      }
      case ActionType::kReduceGrad:
        break;  // the stage's gradients are complete (reduced by the hooks)
    }
  }
  for (auto& pending : sending_) wait(pending);
  sending_.clear();
  TITAN_CHECK(incoming_.empty(), "pipeline: ", incoming_.size(),
              " receives were posted but never used");
  ran_ += since(start);
}

std::pair<double, double> ScheduleRunner::take_times() {
  const std::pair<double, double> out{waited_, ran_};
  waited_ = ran_ = 0;
  return out;
}

}  // namespace titan::train
