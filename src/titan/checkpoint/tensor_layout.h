// Where the model's tensors live when parallelism splits them over ranks: for each parameter
// (and its optimizer state), its global shape and the box of it this process holds
// (common/placement.h). The checkpoint and Hugging Face code reads and writes through this, so
// the same code serves one process (every tensor whole) and many (pieces, and collectives that
// gather them).
#pragma once

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "titan/common/placement.h"

namespace titan::checkpoint {

struct LocalPiece {
  std::vector<int64_t> global_shape;
  Box box;             // the real entries held here; they sit at the local tensor's origin
  bool whole = true;   // the local tensor is the whole tensor (no padding either)
  bool writer = true;  // this process writes this piece to checkpoints (one replica does)
};

class TensorLayout {
 public:
  virtual ~TensorLayout() = default;
  // The piece of model tensor `name` (a parameter, a buffer, or optimizer state named after
  // its parameter, "<param>.exp_avg") whose local copy is `local`. Default: whole.
  virtual LocalPiece piece(const std::string& name, const at::Tensor& local) const;
  // The whole tensor (a collective when split: every rank calls it for the same names in the
  // same order). Default: `local`.
  virtual at::Tensor full(const std::string& name, const at::Tensor& local) const { return local; }
  // Whether this process writes what exists once per job (manifests, Hugging Face files).
  virtual bool coordinator() const { return true; }
  // The mesh the pieces come from, for the checkpoint manifest ({} on one process).
  virtual nlohmann::json mesh() const { return nlohmann::json::object(); }
};

// Every tensor whole, in one process.
const TensorLayout& whole_tensors();

}  // namespace titan::checkpoint
