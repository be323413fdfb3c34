// nf4_linear on the CPU. bfloat16 activations on a CPU with AMX, for weights whose sides are
// multiples of 64 (every projection of the Qwen3 family): the AMX kernels (nf4_amx.h), which
// dequantise into the tiles' layout in cache. Otherwise the shared tiled matmul
// (nf4_matmul.h): the weight dequantised a tile of rows at a time by a parallel loop (nf4.cpp,
// AVX-512 where the CPU has it), then cpu/gemm.h's GEMM on the tile (oneDNN).
#include <torch/csrc/autograd/custom_function.h>

#include "titan/kernels/cpu/cpu_kernels.h"
#include "titan/kernels/cpu/gemm.h"
#include "titan/kernels/cpu/nf4_amx.h"
#include "titan/kernels/nf4.h"
#include "titan/kernels/nf4_matmul.h"

namespace titan::kernels::cpu {
namespace {

// y = x W^T through the AMX kernels, differentiable in x only (the weight is frozen); the
// backward reads the NF4 weight again.
struct AmxNf4Linear : public torch::autograd::Function<AmxNf4Linear> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            const at::Tensor& packed, const at::Tensor& absmax, int64_t rows,
                            int64_t cols, int64_t blocksize) {
    const Nf4Weight w{packed, absmax, rows, cols, blocksize};
    save_nf4_weight(ctx, w);
    std::vector<int64_t> shape = x.sizes().vec();
    shape.back() = rows;
    return nf4_amx_forward(x.reshape({-1, cols}).contiguous(), w).view(shape);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const Nf4Weight w = saved_nf4_weight(ctx);
    torch::autograd::variable_list out(6);
    const at::Tensor& dy = grads[0];
    if (!dy.defined()) return out;
    std::vector<int64_t> shape = dy.sizes().vec();
    shape.back() = w.cols;
    out[0] = nf4_amx_backward(dy.reshape({-1, w.rows}).contiguous(), w).view(shape);
    return out;
  }
};

}  // namespace

at::Tensor nf4_linear(const at::Tensor& x, const Nf4Weight& weight) {
  TORCH_CHECK(x.is_cpu(), "nf4_linear (cpu): input on ", x.device());
  if (nf4_amx_supports(weight, x.scalar_type())) {
    TORCH_CHECK(x.size(-1) == weight.cols, "nf4_linear: input [..., ", x.size(-1),
                "] against a weight [", weight.rows, ", ", weight.cols, "]");
    return AmxNf4Linear::apply(x, weight.packed, weight.absmax, weight.rows, weight.cols,
                               weight.blocksize);
  }
  return tiled_nf4_linear<&dequantize_nf4_rows_cpu, &gemm_out>(x, weight);
}

}  // namespace titan::kernels::cpu
