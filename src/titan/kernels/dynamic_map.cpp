#include "titan/kernels/dynamic_map.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "titan/common/error.h"

namespace titan::kernels {
namespace {

// create_dynamic_map(signed, max_exponent_bits=7, total_bits=8), with the same float32 ATen ops
// (linspace, add, divide, scalar multiply) so that every value is the same: for each of the
// seven decades 10^-6 .. 10^0, the midpoints of an evenly spaced grid over [0.1, 1] scaled
// into that decade (and their negatives when signed), then 0 and 1, sorted.
at::Tensor create_dynamic_map(bool is_signed) {
  std::vector<float> data;
  for (int i = 0; i < 7; ++i) {
    const int64_t items = (int64_t{1} << (is_signed ? i : i + 1)) + 1;
    const at::Tensor boundaries = at::linspace(0.1, 1.0, items, at::kFloat);
    const at::Tensor means = (boundaries.slice(0, 0, items - 1) + boundaries.slice(0, 1)) / 2.0;
    const double scale = i == 6 ? 1.0 : std::pow(10.0, static_cast<double>(i - 6));
    std::vector<at::Tensor> parts = {means * scale};
    if (is_signed) parts.push_back(means * -scale);
    for (const at::Tensor& values : parts) {
      const at::Tensor c = values.contiguous();
      data.insert(data.end(), c.const_data_ptr<float>(), c.const_data_ptr<float>() + c.numel());
    }
  }
  data.push_back(0.0f);
  data.push_back(1.0f);
  TITAN_CHECK(data.size() == 256, "dynamic map: ", data.size(), " values");
  std::sort(data.begin(), data.end());
  return at::tensor(data, at::kFloat);
}

}  // namespace

const at::Tensor& dynamic_map(bool is_signed) {
  static const at::Tensor signed_map = create_dynamic_map(true);
  static const at::Tensor unsigned_map = create_dynamic_map(false);
  return is_signed ? signed_map : unsigned_map;
}

}  // namespace titan::kernels
