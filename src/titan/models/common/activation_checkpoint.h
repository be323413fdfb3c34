// Activation checkpointing (what torch.utils.checkpoint(use_reentrant=True) does): run a block
// without keeping its intermediate activations, and run it again in backward to get them.
// Gradients are bit-identical to the plain block when the block is deterministic.
#pragma once

#include <ATen/ATen.h>

#include <functional>

namespace titan::models {

using Block = std::function<at::Tensor(const at::Tensor&)>;

// block(x) with its activations recomputed in backward. Parameters the block uses receive
// their gradients during that recomputation.
at::Tensor checkpointed(Block block, const at::Tensor& x);

}  // namespace titan::models
