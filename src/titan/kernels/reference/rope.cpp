// Rotary position embedding in the half-split ("NeoX") layout, applied to q and k as Hugging
// Face's apply_rotary_pos_emb does: x*cos + rotate_half(x)*sin.
#include "titan/kernels/reference/reference.h"

namespace titan::kernels::reference {
namespace {

at::Tensor rotate(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const int64_t half = x.size(-1) / 2;
  const at::Tensor rotated = at::cat({-x.slice(-1, half), x.slice(-1, 0, half)}, -1);
  return x * cos + rotated * sin;
}

}  // namespace

RotatedQueryKey rope(const at::Tensor& q, const at::Tensor& k, const at::Tensor& cos,
                     const at::Tensor& sin) {
  return {rotate(q, cos, sin), rotate(k, cos, sin)};
}

}  // namespace titan::kernels::reference
