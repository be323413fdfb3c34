#include "titan/models/common/swiglu.h"

namespace titan::models {

at::Tensor swiglu_mlp(const at::Tensor& x, const at::Tensor& gate_proj, const at::Tensor& up_proj,
                      const at::Tensor& down_proj) {
  const auto dtype = x.scalar_type();
  const at::Tensor gate = at::linear(x, gate_proj.to(dtype));
  const at::Tensor up = at::linear(x, up_proj.to(dtype));
  return at::linear(at::silu(gate) * up, down_proj.to(dtype));
}

}  // namespace titan::models
