#include "titan/common/box_tensor.h"

#include "titan/common/error.h"

namespace titan {

at::Tensor narrow_to(const at::Tensor& tensor, const Box& held, const Box& box) {
  TITAN_CHECK(tensor.dim() == static_cast<int64_t>(box.offset.size()) &&
                  held.offset.size() == box.offset.size(),
              "narrow_to: a tensor of ", tensor.dim(), " dimensions and boxes of ",
              held.offset.size(), " and ", box.offset.size());
  at::Tensor t = tensor;
  for (size_t d = 0; d < box.offset.size(); ++d) {
    TITAN_CHECK(box.offset[d] >= held.offset[d] &&
                    box.offset[d] + box.length[d] <= held.offset[d] + held.length[d],
                "narrow_to: box ", describe(box), " is not inside ", describe(held));
    t = t.narrow(static_cast<int64_t>(d), box.offset[d] - held.offset[d], box.length[d]);
  }
  return t;
}

at::Tensor real_part(const at::Tensor& local, const Box& box) {
  TITAN_CHECK(local.dim() == static_cast<int64_t>(box.length.size()), "real_part: a tensor of ",
              local.dim(), " dimensions and a box of ", box.length.size());
  at::Tensor t = local;
  for (size_t d = 0; d < box.length.size(); ++d)
    t = t.narrow(static_cast<int64_t>(d), 0, box.length[d]);
  return t;
}

}  // namespace titan
