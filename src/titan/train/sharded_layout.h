// The checkpoint code's view (checkpoint/tensor_layout.h) of where data parallelism put the
// model's tensors: parameters (and their optimizer state, named "<param>.exp_avg" and
// "<param>.exp_avg_sq") have the rows DataParallel gave them; step counters, buffers and
// everything else are whole and written by rank 0.
#pragma once

#include "titan/checkpoint/tensor_layout.h"
#include "titan/distributed/data_parallel.h"

namespace titan::train {

class ShardedLayout : public checkpoint::TensorLayout {
 public:
  // `data_parallel` may be null (one process, or a layout without data parallelism).
  ShardedLayout(const distributed::DataParallel* data_parallel, int64_t rank)
      : data_parallel_(data_parallel), rank_(rank) {}

  checkpoint::LocalRows rows(const std::string& name, const at::Tensor& local) const override;
  at::Tensor full(const std::string& name, const at::Tensor& local) const override;
  bool coordinator() const override { return rank_ == 0; }

 private:
  // The parameter a tensor name belongs to, when it is a parameter or its moments.
  std::optional<distributed::DataParallel::Layout> parameter_layout(const std::string& name,
                                                                    std::string* base) const;
  const distributed::DataParallel* data_parallel_;
  int64_t rank_;
};

}  // namespace titan::train
