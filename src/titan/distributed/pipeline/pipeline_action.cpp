#include "titan/distributed/pipeline/pipeline_action.h"

#include <tuple>

namespace titan::distributed::pipeline {

bool Action::operator<(const Action& other) const {
  return std::make_tuple(stage, static_cast<int>(type), microbatch) <
         std::make_tuple(other.stage, static_cast<int>(other.type), other.microbatch);
}

bool Action::is_compute() const {
  return type == ActionType::kForward || type == ActionType::kBackward ||
         type == ActionType::kBackwardInput || type == ActionType::kBackwardWeight;
}

std::string Action::str() const {
  static const char* const names[] = {"F",      "B",      "I",      "W",          "SEND_F",
                                      "RECV_F", "SEND_B", "RECV_B", "REDUCE_GRAD"};
  std::string out = std::to_string(stage) + names[static_cast<int>(type)];
  if (microbatch >= 0) out += std::to_string(microbatch);
  return out;
}

std::string to_string(const std::vector<Action>& actions) {
  std::string out;
  for (const Action& a : actions) out.append(out.empty() ? "" : " ").append(a.str());
  return out;
}

}  // namespace titan::distributed::pipeline
