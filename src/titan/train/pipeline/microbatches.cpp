#include "titan/train/pipeline/microbatches.h"

#include <utility>

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
  for (int64_t i = 0; i < count; ++i) {
    data::Batch b;
    b.inputs = part(batch.inputs, i);
    b.labels = part(batch.labels, i);
    b.positions = part(batch.positions, i);
    b.document_ids = part(batch.document_ids, i);
    b.positions_end = batch.positions_end;
    out.push_back(std::move(b));
  }
  return out;
}

}  // namespace titan::train
