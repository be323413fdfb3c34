// An RMSNorm of a decoder: its weight (a slot) and the rms_norm kernel chosen for its call site.
// A cheap op: under op-level selective activation checkpointing it is recomputed in backward
// rather than kept with its float32 intermediates.
#pragma once

#include <ATen/ATen.h>

#include "titan/kernels/ops.h"
#include "titan/models/common/activation_checkpoint.h"

namespace titan::models {

struct RmsNorm {
  at::Tensor weight;  // [D]
  double eps = 1e-6;
  kernels::RmsNormFn fn = nullptr;

  at::Tensor operator()(const at::Tensor& x) const {
    const kernels::RmsNormFn f = fn;
    const double e = eps;
    const at::Tensor w = weight;
    return recompute_if_selective([f, w, e](const Tensors& in) { return Tensors{f(in[0], w, e)}; },
                                  {x}, {w})[0];
  }
};

}  // namespace titan::models
