// How FSDP splits a tensor: on dim 0 into `parts` blocks of ceil(rows / parts) rows, the last
// ones padded with zero rows (so every rank's shard has the same shape, as the collectives
// need); a vocabulary that does not divide the world size shards correctly.
#pragma once

#include <algorithm>
#include <cstdint>

namespace titan::distributed {

struct RowShard {
  int64_t rows = 0;   // dim 0 of the full tensor
  int64_t parts = 1;  // ranks it is split over
  int64_t index = 0;  // this rank's part

  int64_t part_rows() const { return parts <= 0 ? rows : (rows + parts - 1) / parts; }
  // The real (unpadded) rows of this part: [begin, end) of the full tensor.
  int64_t begin() const { return std::min(index * part_rows(), rows); }
  int64_t end() const { return std::min((index + 1) * part_rows(), rows); }
  int64_t real_rows() const { return end() - begin(); }
};

}  // namespace titan::distributed
