// Lowers every rank's compute order (schedule_orders.h) into the list the executor runs: after
// each forward whose next stage lies on another rank a SEND_F, and the matching RECV_F placed
// in that rank's list at the same moment (backwards likewise, SEND_B / RECV_B to the previous
// stage), and a REDUCE_GRAD after the last backward of each stage. PyTorch's _add_send_recv
// and _add_reduce_grad: the ranks are stepped round-robin, each taking its next action once
// what it needs has arrived, so every pair of ranks issues its transfers to each other in the
// same order and blocking sends and receives cannot deadlock. Torch-free.
#pragma once

#include <cstdint>

#include "titan/distributed/pipeline/pipeline_action.h"
#include "titan/distributed/pipeline/stage_placement.h"

namespace titan::distributed::pipeline {

// `compute` holds one list per rank of `placement`. Throws when the orders cannot run (an
// action waits for one that never comes).
RankActions lower_schedule(const RankActions& compute, const StagePlacement& placement,
                           int64_t microbatches);

}  // namespace titan::distributed::pipeline
