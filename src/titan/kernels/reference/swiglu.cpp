// The SwiGLU feed-forward of Qwen3: down(silu(gate(x)) * up(x)), three projections (linear.h:
// oneDNN's GEMMs on the CPU in float32, the AMX kernels for bfloat16 activations on float32
// weights where the CPU has AMX, at::linear elsewhere; it casts the weights to x's dtype) and
// silu.
#include "titan/kernels/linear.h"
#include "titan/kernels/reference/reference.h"

namespace titan::kernels::reference {

at::Tensor swiglu(const at::Tensor& x, const at::Tensor& gate_proj, const at::Tensor& up_proj,
                  const at::Tensor& down_proj) {
  const at::Tensor gate = kernels::linear(x, gate_proj);
  const at::Tensor up = kernels::linear(x, up_proj);
  return kernels::linear(at::silu(gate) * up, down_proj);
}

}  // namespace titan::kernels::reference
