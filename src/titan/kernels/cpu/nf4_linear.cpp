// nf4_linear on the CPU: the shared tiled matmul (nf4_matmul.h) with the weight dequantised a
// tile of rows at a time by a parallel loop (nf4.cpp), then cpu/gemm.h's GEMM on the tile
// (oneDNN for float32).
#include "titan/kernels/cpu/cpu_kernels.h"
#include "titan/kernels/cpu/gemm.h"
#include "titan/kernels/nf4.h"
#include "titan/kernels/nf4_matmul.h"

namespace titan::kernels::cpu {

at::Tensor nf4_linear(const at::Tensor& x, const Nf4Weight& weight) {
  TORCH_CHECK(x.is_cpu(), "nf4_linear (cpu): input on ", x.device());
  return tiled_nf4_linear<&dequantize_nf4_rows_cpu, &gemm_out>(x, weight);
}

}  // namespace titan::kernels::cpu
