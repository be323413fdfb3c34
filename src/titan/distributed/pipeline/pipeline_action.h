// One action of a pipeline schedule, as PyTorch's schedules name them ("2F0": stage 2, forward,
// microbatch 0): a computation (F forward, B full backward, I backward to the stage's input, W
// backward to its weights), one of the point-to-point transfers that carry activations forward
// and their gradients back (SEND_F, RECV_F, SEND_B, RECV_B), or REDUCE_GRAD, the point after
// which a stage's gradients are complete for the step. Torch-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace titan::distributed::pipeline {

enum class ActionType {
  kForward,
  kBackward,
  kBackwardInput,
  kBackwardWeight,
  kSendForward,
  kRecvForward,
  kSendBackward,
  kRecvBackward,
  kReduceGrad,
};

struct Action {
  int64_t stage = 0;
  ActionType type = ActionType::kForward;
  int64_t microbatch = -1;  // -1 for REDUCE_GRAD

  bool operator==(const Action& other) const {
    return stage == other.stage && type == other.type && microbatch == other.microbatch;
  }
  bool operator<(const Action& other) const;
  bool is_compute() const;
  // "2F0", "1SEND_B3", "0REDUCE_GRAD".
  std::string str() const;
};

// Each rank's actions, indexed by the rank's place in the pipeline group.
using RankActions = std::vector<std::vector<Action>>;

// "0F0 0SEND_F0 ..." of one rank's list, for messages and tests.
std::string to_string(const std::vector<Action>& actions);

}  // namespace titan::distributed::pipeline
