// Where the model's tensors live when data parallelism shards them over ranks (FSDP): for each
// parameter, its full shape and the rows of dim 0 this process holds. The checkpoint and
// Hugging Face code reads and writes through this, so the same code serves one process (every
// tensor whole) and many (pieces, and collectives that gather them).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

namespace titan::checkpoint {

struct LocalRows {
  std::vector<int64_t> full_shape;
  int64_t begin = 0;      // first row of dim 0 held here
  int64_t real_rows = 0;  // rows held here (the local tensor may have zero padding after them)
  bool sharded = false;   // false: the local tensor is the whole tensor
  bool writer = true;     // this process writes this piece to checkpoints (one replica does)
};

class TensorLayout {
 public:
  virtual ~TensorLayout() = default;
  // The layout of model tensor `name` (a parameter, a buffer, or optimizer state named after
  // its parameter, "<param>.exp_avg") whose local copy is `local`. Default: whole.
  virtual LocalRows rows(const std::string& name, const at::Tensor& local) const;
  // The full tensor (a collective when sharded: every rank calls it for the same names in the
  // same order). Default: `local`.
  virtual at::Tensor full(const std::string& name, const at::Tensor& local) const { return local; }
  // Whether this process writes what exists once per job (manifests, Hugging Face files).
  virtual bool coordinator() const { return true; }
};

// Every tensor whole, in one process.
const TensorLayout& whole_tensors();

}  // namespace titan::checkpoint
