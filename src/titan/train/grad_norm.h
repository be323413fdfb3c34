// The global sum of squared gradient entries of a model whose parameters the parallelisms
// placed over the mesh, counting every entry once: the parameters are grouped by the mesh
// dimensions they are sharded over (distributed/parameter_placements.h), each group's local sum
// is summed over exactly those dimensions' groups, and the groups' sums are added. A tensor
// replicated over a dimension is not summed over it (its replicas hold the same gradient).
// Under pipeline parallelism every stage's sum is then summed over pp, the tied embedding's
// gradient (held by the first and the last stage, equal) counted on the first stage only.
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <string>
#include <vector>

#include "titan/common/named_tensors.h"
#include "titan/distributed/device_mesh.h"
#include "titan/distributed/parameter_placements.h"

namespace titan::train {

class GlobalGradSquares {
 public:
  // `params` as the optimizer holds them (their gradients are read at each call).
  GlobalGradSquares(const NamedTensors& params, const distributed::ParameterPlacements& placements,
                    const distributed::DeviceMesh& mesh);
  // A float64 tensor of one entry on the gradients' device; collectives over the groups above,
  // the same on every rank.
  at::Tensor operator()() const;

 private:
  // A replica on pp of another stage's tensor (the last stage's copy of a tied embedding).
  static bool copy_of_another_stage(const TensorPlacement& placement);
  // Mesh dimensions -> the parameters sharded over exactly those, in parameter order.
  std::map<std::vector<std::string>, std::vector<at::Tensor>> buckets_;
  const distributed::DeviceMesh& mesh_;
};

}  // namespace titan::train
