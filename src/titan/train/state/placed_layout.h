// The checkpoint code's view (checkpoint/tensor_layout.h) of where the parallelisms put the
// model's tensors: a parameter, and its optimizer moments ("<param>.exp_avg",
// "<param>.exp_avg_sq", and AdamW8bit's codes, optimizer_state_names.h), have the placement
// recorded for it (distributed/parameter_placements.h); AdamW8bit's per-block absmax has the
// placement derived from it (block_layout.h); a parameter's step counter is whole and written by
// one rank of those that hold the parameter (under pipeline parallelism, of its stage); buffers
// with a placement (a pipeline stage's) follow it; RNG states and everything else are whole
// and written by rank 0.
#pragma once

#include <optional>

#include "titan/checkpoint/tensor_layout.h"
#include "titan/distributed/mesh_context.h"

namespace titan::train {

class PlacedLayout : public checkpoint::TensorLayout {
 public:
  explicit PlacedLayout(const distributed::MeshContext& parallel) : parallel_(parallel) {}

  checkpoint::LocalPiece piece(const std::string& name, const at::Tensor& local) const override;
  at::Tensor full(const std::string& name, const at::Tensor& local) const override;
  bool coordinator() const override { return parallel_.mesh().rank() == 0; }
  nlohmann::json mesh() const override;

 private:
  // The placement of a parameter or of its optimizer state; nullopt: whole.
  std::optional<TensorPlacement> placement_of(const std::string& name) const;
  const distributed::MeshContext& parallel_;
};

}  // namespace titan::train
