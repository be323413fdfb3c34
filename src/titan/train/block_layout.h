// Where AdamW8bit's per-block scales (kernels/blockwise_8bit.h: one float32 absmax per block of
// 256 consecutive elements of the flattened tensor) lie when parallelism splits the tensor
// (docs/optimizers.md, "Checkpoints and parallelism").
//
// Each rank quantises its local piece on its own, in blocks that start at the piece's first
// element. That equals bitsandbytes' blocking of the whole tensor, and the pieces' absmax
// values tile the whole tensor's, exactly when every rank's piece is made of whole blocks of
// the whole tensor. The absmax is then laid out, in checkpoints and across ranks, as:
//   by rows  when the last dimension is a multiple of 256 (every Qwen3 matrix): blocks never
//            cross a row, and the absmax has the tensor's shape with the last dimension divided
//            by 256, and the tensor's placement (any split, as long as a split of the last
//            dimension falls on whole blocks);
//   flat     otherwise: [ceil(numel / 256)], split where the tensor is split on dim 0 (its
//            pieces are then runs of whole rows), as long as every piece starts on a block.
// A tensor whose pieces do not fall on whole blocks keeps float32 states (the optimizer says
// which at start-up), so a block never straddles two ranks.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "titan/common/placement.h"

namespace titan::train {

// Whether the absmax of a tensor of this (global) shape is laid out by rows.
bool absmax_by_rows(const std::vector<int64_t>& shape);

// The absmax's shape for a tensor (or a local piece, padding included) of `shape`.
std::vector<int64_t> absmax_shape(const std::vector<int64_t>& shape, bool by_rows);

// The absmax's placement for a tensor placed as `param`; nullopt when some rank's piece is not
// made of whole blocks (that rank's or any other's: every rank decides the same).
std::optional<TensorPlacement> absmax_placement(const TensorPlacement& param);

}  // namespace titan::train
