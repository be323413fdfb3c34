#include "titan/train/pipeline/microbatches.h"

#include "titan/common/error.h"

namespace titan::train {

std::vector<data::Batch> split_microbatches(const data::Batch& batch, int64_t count) {
  const int64_t rows = batch.inputs.size(0);
  TITAN_CHECK(count >= 1 && rows % count == 0, "pipeline: a batch of ", rows,
              " rows does not split into ", count, " microbatches");
  const int64_t each = rows / count;
  auto part = [&](const at::Tensor& t, int64_t i) {
    return t.defined() ? t.narrow(0, i * each, each) : at::Tensor();
  };
  std::vector<data::Batch> out;
  for (int64_t i = 0; i < count; ++i)
    out.push_back({part(batch.inputs, i), part(batch.labels, i), part(batch.positions, i),
                   part(batch.document_ids, i), batch.positions_end});
  return out;
}

}  // namespace titan::train
