#include "titan/train/sharded_layout.h"

namespace titan::train {

std::optional<distributed::DataParallel::Layout> ShardedLayout::parameter_layout(
    const std::string& name, std::string* base) const {
  if (data_parallel_ == nullptr) return std::nullopt;
  std::string param = name;
  for (const char* suffix : {".exp_avg_sq", ".exp_avg"}) {
    if (name.ends_with(suffix)) {
      param = name.substr(0, name.size() - std::string(suffix).size());
      break;
    }
  }
  if (base != nullptr) *base = param;
  return data_parallel_->layout(param);
}

checkpoint::LocalRows ShardedLayout::rows(const std::string& name, const at::Tensor& local) const {
  checkpoint::LocalRows rows = TensorLayout::rows(name, local);
  rows.writer = rank_ == 0;
  const auto layout = parameter_layout(name, nullptr);
  if (!layout) return rows;
  rows.full_shape = layout->full_shape;
  rows.begin = layout->rows.begin();
  rows.real_rows = layout->rows.real_rows();
  rows.sharded = layout->rows.parts > 1;
  rows.writer = layout->writer;
  return rows;
}

at::Tensor ShardedLayout::full(const std::string& name, const at::Tensor& local) const {
  std::string param;
  const auto layout = parameter_layout(name, &param);
  if (!layout || layout->rows.parts == 1) return local;
  return data_parallel_->gather_full(param, local);
}

}  // namespace titan::train
