// The CUDA kernels' host-side launchers (defined in the .cu files of this folder). They take
// contiguous tensors on one CUDA device, allocate nothing unless they return a tensor, and
// launch on the current stream. The autograd functions around them are in the .cpp files.
#pragma once

#include <ATen/ATen.h>

#include <array>

#include "titan/kernels/adamw8bit.h"

namespace titan::kernels::cuda {

// rms_norm.cu. x [R, D], w [D] (x's dtype) -> y [R, D] and inv_rms [R] (float32).
void rms_norm_forward(const at::Tensor& x, const at::Tensor& w, double eps, at::Tensor& y,
                      at::Tensor& inv_rms);
// dx [R, D] and dw_blocks [ceil(R / kRmsNormRowsPerBlock), D] (float32 partial sums).
inline constexpr int64_t kRmsNormRowsPerBlock = 64;
void rms_norm_backward(const at::Tensor& dy, const at::Tensor& x, const at::Tensor& w,
                       const at::Tensor& inv_rms, at::Tensor& dx, at::Tensor& dw_blocks);

// swiglu.cu. h [N, 2I] = [gate | up] -> a [N, I] = silu(gate) * up; and its backward.
void silu_mul_forward(const at::Tensor& h, at::Tensor& a);
void silu_mul_backward(const at::Tensor& h, const at::Tensor& da, at::Tensor& dh);

// rope.cu. q [B, nq, S, d], k [B, nkv, S, d] with unit stride in the last dim, cos/sin [S, d]
// contiguous -> q_out, k_out contiguous. `inverse` applies the transposed rotation (backward).
void rope_apply(const at::Tensor& q, const at::Tensor& k, const at::Tensor& cos,
                const at::Tensor& sin, bool inverse, at::Tensor& q_out, at::Tensor& k_out);

// moe.cu. out[r] = x[index[r]] for r < N.
void gather_rows(const at::Tensor& x, const at::Tensor& index, at::Tensor& out);
// out[t] = sum_s w[t, s] * y[row_of_slot[t * k + s]] (w undefined: weights 1), k = top_k.
void combine_rows(const at::Tensor& y, const at::Tensor& w, const at::Tensor& row_of_slot,
                  int64_t top_k, at::Tensor& out);
// dy[row(t,s)] = w[t,s] * g[t]; dw[t,s] = <g[t], y[row(t,s)]>.
void combine_rows_backward(const at::Tensor& g, const at::Tensor& y, const at::Tensor& w,
                           const at::Tensor& row_of_slot, at::Tensor& dy, at::Tensor& dw);

// cross_entropy.cu. logits [R, V] in place -> softmax - one_hot(label) (zero rows where the
// label is ignore_index) when `write_grad`; loss [R] float32 = logsumexp - logit[label] (0 for
// ignored rows).
void cross_entropy_rows(at::Tensor& logits, const at::Tensor& labels, int64_t ignore_index,
                        bool write_grad, at::Tensor& loss);

// nf4_linear.cu. Rows [begin, begin + out.size(0)) of an NF4 weight (packed uint8 and float32
// absmax on the device, `cols` columns, blocks of `blocksize`, `code` the 16 values)
// dequantised into `out` ([n, cols] contiguous, float32, bfloat16 or float16).
void nf4_dequantize_rows(const std::array<float, 16>& code, const at::Tensor& packed,
                         const at::Tensor& absmax, int64_t cols, int64_t blocksize, int64_t begin,
                         at::Tensor& out);

// adamw8bit.cu. One AdamW8bit step of a contiguous float32 or bfloat16 parameter, its
// gradient of the same dtype and its two 8-bit states (uint8 codes, float32 absmax per 256).
void adamw8bit_step(at::Tensor& param, const at::Tensor& grad, at::Tensor& codes_m,
                    at::Tensor& absmax_m, at::Tensor& codes_v, at::Tensor& absmax_v,
                    const AdamW8bitFloats& s);

}  // namespace titan::kernels::cuda
