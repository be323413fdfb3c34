// An identity on tensors whose backward runs a callback: how data parallelism learns, from
// inside autograd, that a unit's backward is about to start (a hook on its outputs) or is done
// (a hook on its inputs), as FSDP2's pre- and post-backward hooks do.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <vector>

namespace titan::distributed {

// Returns `tensors` with the floating-point ones that require grad passed through an autograd
// node whose backward calls `hook` once (when the gradients of all of them are in), then
// passes the gradients on unchanged. Outside grad mode, or with no such tensor, returns
// `tensors` as they are and `hook` never runs.
std::vector<at::Tensor> with_backward_hook(const std::vector<at::Tensor>& tensors,
                                           std::function<void()> hook);

}  // namespace titan::distributed
