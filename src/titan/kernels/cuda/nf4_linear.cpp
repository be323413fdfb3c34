// nf4_linear on CUDA: the shared tiled matmul (nf4_matmul.h) with each tile dequantised by the
// kernel of nf4_linear.cu, then cuBLAS.
#include "titan/kernels/cuda/cuda_kernels.h"
#include "titan/kernels/cuda/launchers.h"
#include "titan/kernels/nf4.h"
#include "titan/kernels/nf4_matmul.h"

namespace titan::kernels::cuda {
namespace {

void dequantize_rows(const Nf4Weight& w, int64_t begin, at::Tensor& out) {
  nf4_dequantize_rows(nf4_code(), w.packed, w.absmax, w.cols, w.blocksize, begin, out);
}

}  // namespace

at::Tensor nf4_linear(const at::Tensor& x, const Nf4Weight& weight) {
  TORCH_CHECK(
      x.is_cuda() && weight.packed.device() == x.device() && weight.absmax.device() == x.device(),
      "nf4_linear (cuda): input and weight on one CUDA device expected");
  return tiled_nf4_linear<&dequantize_rows>(x, weight);
}

}  // namespace titan::kernels::cuda
