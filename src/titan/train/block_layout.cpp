#include "titan/train/block_layout.h"

#include <functional>

#include "titan/kernels/blockwise_8bit.h"

namespace titan::train {
namespace {

constexpr int64_t kBlock = kernels::kQuantBlock;

int64_t product(const std::vector<int64_t>& v, size_t from = 0) {
  int64_t n = 1;
  for (size_t d = from; d < v.size(); ++d) n *= v[d];
  return n;
}

// Whether this rank's piece (as `param` places it) is made of whole blocks, its absmax being
// the box `absmax` places on it.
bool whole_blocks(const TensorPlacement& param, const TensorPlacement& absmax, bool by_rows) {
  const std::vector<int64_t> shape = local_shape(param);
  const Box box = local_box(param);
  const std::vector<int64_t> scale_shape = local_shape(absmax);
  const Box scale_box = local_box(absmax);
  if (by_rows) {
    // Blocks of the local rows are blocks of the whole tensor's rows.
    if (shape.back() % kBlock != 0 || box.offset.back() % kBlock != 0 ||
        box.length.back() % kBlock != 0)
      return false;
    Box want = box;
    want.offset.back() /= kBlock;
    want.length.back() /= kBlock;
    return scale_box == want && scale_shape == absmax_shape(shape, true);
  }
  // Flat: the piece is a run of whole rows, starting on a block, ending on one or at the end.
  const int64_t row = product(param.global_shape, 1);
  const int64_t start = box.offset.empty() ? 0 : box.offset[0] * row;
  const int64_t length = box.numel();
  if (start % kBlock != 0 ||
      (length % kBlock != 0 && start + length != product(param.global_shape)))
    return false;
  return scale_box.offset == std::vector<int64_t>{start / kBlock} &&
         scale_box.length == std::vector<int64_t>{kernels::quant_blocks(length)} &&
         scale_shape == std::vector<int64_t>{kernels::quant_blocks(product(shape))};
}

}  // namespace

bool absmax_by_rows(const std::vector<int64_t>& shape) {
  return !shape.empty() && shape.back() % kBlock == 0;
}

std::vector<int64_t> absmax_shape(const std::vector<int64_t>& shape, bool by_rows) {
  if (!by_rows) return {kernels::quant_blocks(product(shape))};
  std::vector<int64_t> out = shape;
  out.back() /= kBlock;
  return out;
}

std::optional<TensorPlacement> absmax_placement(const TensorPlacement& param) {
  const bool by_rows = absmax_by_rows(param.global_shape);
  TensorPlacement absmax{absmax_shape(param.global_shape, by_rows), param.on};
  for (const PlacedOn& on : param.on)
    if (!by_rows && on.placement.is_shard() && on.size > 1 && on.placement.dim != 0)
      return std::nullopt;  // a flat absmax follows splits of dim 0 only
  // Every rank's coordinates along the split dimensions (the others do not move its piece).
  std::vector<size_t> split;
  for (size_t e = 0; e < param.on.size(); ++e)
    if (param.on[e].placement.is_shard() && param.on[e].size > 1) split.push_back(e);
  TensorPlacement p = param, a = absmax;
  std::function<bool(size_t)> every = [&](size_t k) {
    if (k == split.size()) return whole_blocks(p, a, by_rows);
    for (int64_t i = 0; i < param.on[split[k]].size; ++i) {
      p.on[split[k]].index = a.on[split[k]].index = i;
      if (!every(k + 1)) return false;
    }
    return true;
  };
  if (!every(0)) return std::nullopt;
  return absmax;
}

}  // namespace titan::train
