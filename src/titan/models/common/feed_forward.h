// The SwiGLU feed-forward of a dense decoder layer: down(silu(gate(x)) * up(x)).
//
// Call sites (PATH is the layer's, "layers.N"): PATH.feed_forward (swiglu), and
// PATH.feed_forward.{gate,up,down}_proj (nf4_linear, a projection held in NF4 under QLoRA). A
// feed-forward whose projections carry an adapter or NF4 runs as three projections and silu,
// not through the swiglu op. Under tensor parallelism gate/up are column-parallel and down
// row-parallel; the layer runs the hooks around it.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <utility>
#include <vector>

#include "titan/kernels/ops.h"
#include "titan/models/common/linear.h"

namespace titan::kernels {
class OverrideResolver;
}

namespace titan::models {

class FeedForward {
 public:
  FeedForward(int64_t hidden_size, int64_t intermediate_size, const std::string& path,
              const at::TensorOptions& options, kernels::OverrideResolver& overrides);

  at::Tensor forward(const at::Tensor& x) const;  // [..., H] -> [..., H]
  // Parameters under `prefix` ("model.layers.N.mlp.").
  void visit_parameters(const std::string& prefix, const ParameterVisitor& visit);
  // The projections by their name in the layer ("mlp.gate_proj", ...).
  std::vector<std::pair<std::string, Linear*>> projections();

 private:
  Linear gate_proj_, up_proj_, down_proj_;
  kernels::SwigluFn swiglu_ = nullptr;
};

}  // namespace titan::models
