#include "titan/train/grad_norm.h"

#include <ATen/core/grad_mode.h>

#include "titan/train/grad_clip.h"

namespace titan::train {

GlobalGradSquares::GlobalGradSquares(const NamedTensors& params,
                                     const distributed::ParameterPlacements& placements,
                                     const distributed::DeviceMesh& mesh)
    : mesh_(mesh) {
  for (const auto& [name, p] : params) {
    const TensorPlacement* placement = placements.find(name);
    if (placement != nullptr && copy_of_another_stage(*placement)) continue;
    buckets_[placement ? placement->sharded_over() : std::vector<std::string>{}].push_back(p);
  }
}

bool GlobalGradSquares::copy_of_another_stage(const TensorPlacement& placement) {
  for (const PlacedOn& on : placement.on)
    if (on.mesh_dim == "pp" && !on.placement.is_shard() && !on.placement.is_owned() &&
        on.index != 0)
      return true;
  return false;
}

at::Tensor GlobalGradSquares::operator()() const {
  at::NoGradGuard no_grad;
  at::Tensor total;
  // Every rank of a pipeline stage has the same buckets (the placements differ by coordinate
  // only), and their groups hold ranks of one stage, so the collectives below match.
  for (const auto& [dims, params] : buckets_) {
    at::Tensor squares = total_grad_squares(params).reshape({1});
    for (const std::string& dim : dims) mesh_[dim].all_reduce(squares);
    total = total.defined() ? total + squares.to(total.device()) : squares;
  }
  if (!total.defined()) total = at::zeros({1}, at::kDouble);
  // Each stage's sum once: the stages hold different tensors (a tied embedding's copies are
  // counted by the first stage alone).
  if (mesh_.size("pp") > 1) mesh_["pp"].all_reduce(total);
  return total;
}

}  // namespace titan::train
