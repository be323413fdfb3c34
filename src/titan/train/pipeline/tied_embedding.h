// The embedding table of a model with tied embeddings under pipeline parallelism: the first
// stage looks tokens up in it, the last stage holds its own copy as the head (the decoder's
// keep_only). Both copies start equal (the same seeded values or the same checkpoint tensor);
// each step their gradients are summed here, so both take the same optimizer step from the same
// state and stay equal. The first stage's copy is the one checkpoints write and the gradient
// norm counts (MeshContext::hold_on_stage). docs/distributed.md, "Tied embeddings".
#pragma once

#include <ATen/ATen.h>

#include "titan/distributed/group.h"

namespace titan::train {

// Adds the gradient of `param` held by pipeline rank `peer` to this one's (and there the other
// way round): the first stage's rank sends first, the last stage's receives first, so the two
// transfers meet in order. A zero gradient stands in for none.
void sum_tied_gradients(at::Tensor& param, distributed::Group& pp, int64_t peer, bool sends_first);

}  // namespace titan::train
