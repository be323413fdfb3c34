#include "titan/checkpoint/tensor_layout.h"

namespace titan::checkpoint {

LocalRows TensorLayout::rows(const std::string&, const at::Tensor& local) const {
  LocalRows rows;
  rows.full_shape = local.sizes().vec();
  rows.real_rows = local.dim() > 0 ? local.size(0) : 1;
  return rows;
}

const TensorLayout& whole_tensors() {
  static const TensorLayout layout;
  return layout;
}

}  // namespace titan::checkpoint
