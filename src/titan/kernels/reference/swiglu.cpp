// The SwiGLU feed-forward of Qwen3: down(silu(gate(x)) * up(x)).
#include "titan/kernels/reference/reference.h"

namespace titan::kernels::reference {

at::Tensor swiglu(const at::Tensor& x, const at::Tensor& gate_proj, const at::Tensor& up_proj,
                  const at::Tensor& down_proj) {
  const auto dtype = x.scalar_type();
  const at::Tensor gate = at::linear(x, gate_proj.to(dtype));
  const at::Tensor up = at::linear(x, up_proj.to(dtype));
  return at::linear(at::silu(gate) * up, down_proj.to(dtype));
}

}  // namespace titan::kernels::reference
