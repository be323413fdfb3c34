// The placement of every parameter that is not whole on every rank, by name: written by the
// code that splits a parameter (FSDP here; tensor and expert parallelism the same way), read by
// the checkpoint and Hugging Face code (which piece a rank holds, how to gather the whole
// tensor) and by the gradient norm (over which groups a sum of squares is summed). A
// parameter's gradient and optimizer state have its placement.
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <string>
#include <vector>

#include "titan/common/placement.h"

namespace titan::distributed {

class DeviceMesh;

class ParameterPlacements {
 public:
  // Records (or replaces) the placement of `name`.
  void set(const std::string& name, TensorPlacement placement);
  // nullptr: the parameter is whole on every rank (or not a parameter).
  const TensorPlacement* find(const std::string& name) const;
  bool empty() const { return by_name_.empty(); }
  const std::map<std::string, TensorPlacement>& all() const { return by_name_; }

 private:
  std::map<std::string, TensorPlacement> by_name_;
};

// The whole tensor from every rank's `local` piece (padding included): each mesh dimension the
// tensor is sharded over is all-gathered in turn, innermost split first. A collective over
// those groups: every rank of them calls it for the same tensors in the same order.
at::Tensor gather_whole(const TensorPlacement& placement, const at::Tensor& local,
                        const DeviceMesh& mesh);

// This rank's local piece of the whole tensor `whole` (zero padding included).
at::Tensor local_piece(const TensorPlacement& placement, const at::Tensor& whole);

}  // namespace titan::distributed
