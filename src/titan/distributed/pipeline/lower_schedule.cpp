#include "titan/distributed/pipeline/lower_schedule.h"

#include <deque>
#include <map>
#include <set>

#include "titan/common/error.h"

namespace titan::distributed::pipeline {
namespace {

using T = ActionType;

bool is_backward(T type) { return type == T::kBackward || type == T::kBackwardInput; }

// REDUCE_GRAD after the n-th B or W of each stage.
std::vector<Action> with_reduce_grad(const std::vector<Action>& ops, int64_t microbatches) {
  std::vector<Action> out;
  std::map<int64_t, int64_t> done;
  for (const Action& a : ops) {
    out.push_back(a);
    if ((a.type == T::kBackward || a.type == T::kBackwardWeight) && ++done[a.stage] == microbatches)
      out.push_back({a.stage, T::kReduceGrad, -1});
  }
  return out;
}

}  // namespace

RankActions lower_schedule(const RankActions& compute, const StagePlacement& placement,
                           int64_t microbatches) {
  const int64_t ranks = static_cast<int64_t>(compute.size());
  TITAN_CHECK(ranks == placement.ranks, "pipeline: ", ranks, " compute lists for ", placement.ranks,
              " ranks");
  const int64_t last = placement.stages - 1;
  auto remote = [&](int64_t from, int64_t to) {
    return placement.rank_of(from) != placement.rank_of(to);
  };
  // Whether an action hands its result to a stage on another rank.
  auto sends = [&](const Action& a) {
    if (a.type == T::kForward) return a.stage != last && remote(a.stage, a.stage + 1);
    if (is_backward(a.type)) return a.stage != 0 && remote(a.stage, a.stage - 1);
    return false;
  };
  std::vector<std::deque<Action>> todo;
  for (const auto& ops : compute) {
    const std::vector<Action> full = with_reduce_grad(ops, microbatches);
    todo.emplace_back(full.begin(), full.end());
  }
  RankActions out(static_cast<size_t>(ranks));
  std::vector<std::set<Action>> done(static_cast<size_t>(ranks));
  // A forward needs its input (received, or computed here by the previous stage); a backward
  // its output's gradient likewise. Receives are placed by their senders.
  auto ready = [&](const Action& a, const std::set<Action>& seen) {
    if (a.type == T::kForward && a.stage != 0)
      return seen.count({a.stage, T::kRecvForward, a.microbatch}) > 0 ||
             seen.count({a.stage - 1, T::kForward, a.microbatch}) > 0;
    if (is_backward(a.type) && a.stage != last)
      return seen.count({a.stage, T::kRecvBackward, a.microbatch}) > 0 ||
             seen.count({a.stage + 1, T::kBackwardInput, a.microbatch}) > 0 ||
             seen.count({a.stage + 1, T::kBackward, a.microbatch}) > 0;
    return true;
  };
  bool left = true;
  while (left) {
    left = false;
    bool progress = false;
    for (int64_t r = 0; r < ranks; ++r) {
      if (todo[r].empty()) continue;
      left = true;
      const Action a = todo[r].front();
      if (!ready(a, done[r])) continue;
      out[r].push_back(a);
      done[r].insert(a);
      if (sends(a)) {
        const bool forward = a.type == T::kForward;
        const Action send{a.stage, forward ? T::kSendForward : T::kSendBackward, a.microbatch};
        const int64_t to = forward ? a.stage + 1 : a.stage - 1;
        const Action recv{to, forward ? T::kRecvForward : T::kRecvBackward, a.microbatch};
        out[r].push_back(send);
        done[r].insert(send);
        const int64_t peer = placement.rank_of(to);
        out[peer].push_back(recv);
        done[peer].insert(recv);
      }
      todo[r].pop_front();
      progress = true;
    }
    TITAN_CHECK(!left || progress,
                "pipeline: the schedule cannot run: every rank waits (next "
                "actions: rank 0 ",
                todo[0].empty() ? "-" : todo[0].front().str(), ")");
  }
  return out;
}

}  // namespace titan::distributed::pipeline
