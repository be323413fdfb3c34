// One step of bitsandbytes' AdamW8bit for one parameter, as its CPU backend computes it
// (bitsandbytes 0.50, optimizer "adam" with 8-bit block-wise states; docs/optimizers.md):
//
//   m, v   = dequantised states (m: the signed map, v: the unsigned one; blockwise_8bit.h)
//   m      = m * b1 + g * (1 - b1)                      (one fused multiply-add)
//   v      = v * b2 + ((1 - b2) * g) * g                (one fused multiply-add)
//   p      = p * (1 - lr * wd)                          (only when wd > 0)
//   p      = p + (-lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
//   states = m and v quantised again, each block with its new absmax
//
// in float32 (the scalars computed in float64 and rounded to float32, as ATen rounds a Python
// scalar), where t is the step after it is counted. The update uses the float32 m and v before
// they are quantised. Tensors below min_8bit_size keep float32 states and bitsandbytes'
// 32-bit update, a different formula: adam_fp32_states_step.
//
//   fused      one pass over each block (dequantise, update, write the parameter, quantise),
//              on every core (CPU, kernels/cpu/adamw8bit.h) or one CUDA block per quantisation
//              block (kernels/cuda/adamw8bit.cu); no float32 copy of a state ever exists.
//   reference  bitsandbytes' own sequence of ATen ops over whole tensors (any device).
//
// On the CPU both give the same bits as bitsandbytes (the fused kernel's square roots are
// MKL's, which ATen's sqrt and so bitsandbytes call: computed in registers as MKL's AVX-512
// kernel does where a start-up check finds them equal, else by calling it). The parameter may be
// float32 or bfloat16 (updated in float32 and rounded to nearest even, as bitsandbytes copies it
// back); the gradient has the parameter's dtype.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

#include "titan/kernels/blockwise_8bit.h"

namespace titan::kernels {

struct AdamStepScalars {
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;
  int64_t step = 1;  // this step's number, counted from 1
};

// The float32 scalars of one 8-bit step, rounded as ATen rounds bitsandbytes' Python scalars.
struct AdamW8bitFloats {
  float beta1, one_minus_beta1, beta2, one_minus_beta2;
  float bias_correction2_sqrt;  // sqrt(1 - b2^t)
  float eps;
  float decay;      // 1 - lr * wd, or exactly 1 when wd is 0 (bitsandbytes then skips it)
  float step_size;  // -lr / (1 - b1^t)
};
AdamW8bitFloats adamw8bit_floats(const AdamStepScalars& s);

// `param` contiguous; `grad` its shape and dtype; the states on the parameter's device with
// quant_blocks(param.numel()) blocks. Updates param and both states in place.
void adamw8bit_step_fused(at::Tensor& param, const at::Tensor& grad, BlockwiseQuantized& exp_avg,
                          BlockwiseQuantized& exp_avg_sq, const AdamStepScalars& s);
void adamw8bit_step_reference(at::Tensor& param, const at::Tensor& grad,
                              BlockwiseQuantized& exp_avg, BlockwiseQuantized& exp_avg_sq,
                              const AdamStepScalars& s);

// bitsandbytes' 32-bit update (its small tensors' path), float32 states shaped like param:
//   m = m * b1 + g * (1 - b1);  v = v * b2 + ((1 - b2) * g) * g
//   p = p * (1 - lr * wd)                                   (only when wd > 0)
//   p = p + (m / (sqrt(v) + eps * sqrt(1 - b2^t))) * (-lr * sqrt(1 - b2^t) / (1 - b1^t))
void adam_fp32_states_step(at::Tensor& param, const at::Tensor& grad, at::Tensor& exp_avg,
                           at::Tensor& exp_avg_sq, const AdamStepScalars& s);

}  // namespace titan::kernels
