// The loss over a head split on the vocabulary (torchtitan's loss parallel): each rank of the
// tensor-parallel group holds rows [begin, begin + real) of the [V, H] head (padded to the same
// rows on every rank) and computes its chunk of logits only; the max and the sum of
// exponentials of every row are all-reduced over the group, and the target's logit comes from
// the rank that holds it. No rank holds [tokens, V] logits. Like the chunked loss
// (kernels/reference), it computes the gradients chunk by chunk in the forward.
#pragma once

#include <ATen/ATen.h>

#include <memory>

#include "titan/distributed/group.h"

namespace titan::distributed {

// Sum over labels != ignore_index of the cross-entropy of hidden [N, H] (the same on every rank
// of `group`) @ weight^T, weight [padded rows, H] holding vocabulary rows [begin, begin + real).
// The gradient with respect to hidden is this rank's partial sum (sum it over the group, as
// copy_to_group does in backward).
at::Tensor vocab_parallel_cross_entropy(const at::Tensor& hidden, const at::Tensor& weight,
                                        const at::Tensor& labels, int64_t begin, int64_t real,
                                        int64_t ignore_index, std::shared_ptr<Group> group);

}  // namespace titan::distributed
