// The attention of context parallelism over a cp group (models/parallel_context.h,
// ContextParallelAttention), torchtitan's all-gather design: each rank keeps its queries and
// all-gathers the keys and values of the other ranks' tokens, then attends with the mask of its
// tokens' global places.
//
// Per layer and call: k and v (concatenated on the head dimension, one collective) are
// all-gathered over cp; the backward reduce-scatters their gradients, so every rank receives the
// sum of every rank's gradient for its own tokens. The gathered rows, in rank order, are put
// in sequence order (sequence_shards.h) and the layer's context_attention op runs with the
// global indices of this rank's queries. Packed rows' document ids are all-gathered once per
// forward: the ids tensor the decoder hands every layer is remembered (by identity, the same
// on every rank) with its gathered ids.
#pragma once

#include <memory>

#include "titan/distributed/group.h"
#include "titan/distributed/sequence_shards.h"
#include "titan/models/parallel_context.h"

namespace titan::distributed {

models::ContextParallelAttention make_context_parallel_attention(std::shared_ptr<Group> cp,
                                                                 LoadBalancer balancer);

}  // namespace titan::distributed
