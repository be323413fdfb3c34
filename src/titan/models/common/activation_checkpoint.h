// Activation checkpointing: run part of a forward without keeping its intermediate
// activations, and run it again in backward to get them (torch.utils.checkpoint). Applied to a
// model from outside, as wrappers of its blocks (apply_activation_checkpointing), by the model
// spec's parallelize step.
//
// Modes (activation_checkpoint.mode / selective_ac_option, torchtitan's names):
//   full           every block is recomputed in backward;
//   selective, N   every N-th block (torchtitan's count: blocks N-1, 2N-1, ...);
//   selective, op  every block keeps its matmul and attention outputs and recomputes only the
//                  cheap ops its code marks with recompute_if_selective (norms, rotary
//                  embedding), which are otherwise kept with their float32 intermediates.
// Gradients are bit-identical to the plain model's: the recomputation is the same
// deterministic computation, random numbers included (the generators' states are put back for
// it, as PyTorch's checkpoint does with preserve_rng_state).
#pragma once

#include "titan/config/trainer_config.h"
#include "titan/models/module.h"

namespace titan::models {

// fn(inputs), with fn's activations recomputed in backward. `params` are the tensors fn reads
// besides its inputs (captured, e.g. the module's parameters): their gradients, like the
// inputs', flow through the autograd engine from this node. Outputs that are not floating
// point (counts) are not differentiable. Outside grad mode this is just fn(inputs).
Tensors checkpointed(ForwardFn fn, const Tensors& inputs, const Tensors& params);

// Whether the running forward trains: autograd records it, or it is a checkpointed forward
// (run without autograd, recomputed with it in backward). What dropout asks.
bool is_training_forward();

// Inside the forward of a module wrapped for op-level selective checkpointing (and in grad
// mode): checkpointed(fn, inputs, params). Anywhere else: fn(inputs).
Tensors recompute_if_selective(ForwardFn fn, const Tensors& inputs, const Tensors& params);

// Wraps `blocks` according to the config. "none" adds nothing; an unknown mode or option is a
// titan::Error naming the key.
void apply_activation_checkpointing(const std::vector<Module*>& blocks,
                                    const config::ActivationCheckpointConfig& config);

}  // namespace titan::models
