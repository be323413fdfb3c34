// The SwiGLU feed-forward of Qwen3: down(silu(gate(x)) * up(x)), three projections (linear.h:
// oneDNN's GEMMs on the CPU in float32, at::linear elsewhere) and silu.
#include "titan/kernels/linear.h"
#include "titan/kernels/reference/reference.h"

namespace titan::kernels::reference {

at::Tensor swiglu(const at::Tensor& x, const at::Tensor& gate_proj, const at::Tensor& up_proj,
                  const at::Tensor& down_proj) {
  const auto dtype = x.scalar_type();
  const at::Tensor gate = kernels::linear(x, gate_proj.to(dtype));
  const at::Tensor up = kernels::linear(x, up_proj.to(dtype));
  return kernels::linear(at::silu(gate) * up, down_proj.to(dtype));
}

}  // namespace titan::kernels::reference
