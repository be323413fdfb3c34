#include "titan/distributed/parameter_placements.h"

#include <ATen/core/grad_mode.h>

#include "titan/common/box_tensor.h"
#include "titan/common/error.h"
#include "titan/distributed/device_mesh.h"

namespace titan::distributed {

void ParameterPlacements::set(const std::string& name, TensorPlacement placement) {
  by_name_[name] = std::move(placement);
}

const TensorPlacement* ParameterPlacements::find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &it->second;
}

namespace {

// `placement` with its first `keep` entries only.
TensorPlacement outer(const TensorPlacement& placement, size_t keep) {
  TensorPlacement out = placement;
  out.on.resize(keep);
  return out;
}

}  // namespace

at::Tensor gather_whole(const TensorPlacement& placement, const at::Tensor& local,
                        const DeviceMesh& mesh) {
  at::NoGradGuard no_grad;
  const std::vector<int64_t> expected = local_shape(placement);
  TITAN_CHECK(local.sizes().vec() == expected, "gather: the local piece has shape ", local.sizes(),
              " but placement ", describe(placement), " of global shape ",
              at::IntArrayRef(placement.global_shape), " gives ", at::IntArrayRef(expected));
  at::Tensor t = local.detach();
  for (size_t i = placement.on.size(); i-- > 0;) {
    const PlacedOn& on = placement.on[i];
    if (!on.placement.is_shard() || on.size == 1) continue;
    Group& group = mesh[on.mesh_dim];
    TITAN_CHECK(group.size() == on.size, "gather: placement ", describe(placement),
                " has mesh dimension ", on.mesh_dim, " of size ", on.size,
                " but the mesh's group has ", group.size(), " ranks");
    const int64_t dim = on.placement.dim;
    // The collective concatenates on dim 0: gather the split dimension moved to the front.
    at::Tensor front = t.movedim(dim, 0).contiguous();
    std::vector<int64_t> shape = front.sizes().vec();
    shape[0] *= on.size;
    std::vector<at::Tensor> outputs{at::empty(shape, front.options())};
    std::vector<at::Tensor> inputs{front};
    group.all_gather_async(outputs, inputs).wait();
    // The parent's extent on that dimension (before this split, its padding included).
    const int64_t parent = local_shape(outer(placement, i))[static_cast<size_t>(dim)];
    t = outputs[0].narrow(0, 0, parent).movedim(0, dim);
  }
  for (int64_t d = 0; d < t.dim(); ++d) t = t.narrow(d, 0, placement.global_shape[d]);
  return t.contiguous();
}

at::Tensor local_piece(const TensorPlacement& placement, const at::Tensor& whole) {
  TITAN_CHECK(whole.sizes().vec() == placement.global_shape, "local_piece: tensor of shape ",
              whole.sizes(), " for placement of global shape ",
              at::IntArrayRef(placement.global_shape));
  const Box box = local_box(placement);
  at::Tensor out = at::zeros(local_shape(placement), whole.options());
  real_part(out, box).copy_(narrow_to(whole, whole_box(placement.global_shape), box));
  return out;
}

}  // namespace titan::distributed
