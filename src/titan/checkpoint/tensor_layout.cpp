#include "titan/checkpoint/tensor_layout.h"

namespace titan::checkpoint {

LocalPiece TensorLayout::piece(const std::string&, const at::Tensor& local) const {
  LocalPiece piece;
  piece.global_shape = local.sizes().vec();
  piece.box = whole_box(piece.global_shape);
  return piece;
}

const TensorLayout& whole_tensors() {
  static const TensorLayout layout;
  return layout;
}

}  // namespace titan::checkpoint
