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
    buckets_[placement ? placement->sharded_over() : std::vector<std::string>{}].push_back(p);
  }
}

at::Tensor GlobalGradSquares::operator()() const {
  at::NoGradGuard no_grad;
  at::Tensor total;
  // Every rank has the same buckets (the placements differ by coordinate only), so the
  // collectives below match.
  for (const auto& [dims, params] : buckets_) {
    at::Tensor squares = total_grad_squares(params).reshape({1});
    for (const std::string& dim : dims) mesh_[dim].all_reduce(squares);
    total = total.defined() ? total + squares.to(total.device()) : squares;
  }
  return total.defined() ? total : at::zeros({1}, at::kDouble);
}

}  // namespace titan::train
