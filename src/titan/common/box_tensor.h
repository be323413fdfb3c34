// Boxes (placement.h) applied to tensors: views of the entries a box names.
#pragma once

#include <ATen/ATen.h>

#include "titan/common/placement.h"

namespace titan {

// The entries of `box` (global coordinates) out of a tensor that holds the box `held`: a view,
// narrowed on every dimension. Throws when `box` is not inside `held`.
at::Tensor narrow_to(const at::Tensor& tensor, const Box& held, const Box& box);

// The real entries of a local piece whose box is `box`: they sit at its origin (a view).
at::Tensor real_part(const at::Tensor& local, const Box& box);

}  // namespace titan
