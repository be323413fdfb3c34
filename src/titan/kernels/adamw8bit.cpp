#include "titan/kernels/adamw8bit.h"

#include <ATen/core/grad_mode.h>

#include <cmath>

#include "titan/common/error.h"
#include "titan/kernels/cpu/adamw8bit.h"
#if defined(TITAN_WITH_CUDA)
#include "titan/kernels/cuda/launchers.h"
#endif

namespace titan::kernels {
namespace {

// 1 - b1^t and sqrt(1 - b2^t), in float64 as bitsandbytes computes them in Python.
double bias_correction1(const AdamStepScalars& s) {
  return 1.0 - std::pow(s.beta1, static_cast<double>(s.step));
}
double bias_correction2_sqrt(const AdamStepScalars& s) {
  return std::sqrt(1.0 - std::pow(s.beta2, static_cast<double>(s.step)));
}

void check_states(const at::Tensor& param, const at::Tensor& grad, const BlockwiseQuantized& m,
                  const BlockwiseQuantized& v) {
  TITAN_CHECK(param.is_contiguous() && grad.sizes() == param.sizes() &&
                  grad.scalar_type() == param.scalar_type(),
              "AdamW8bit: the parameter must be contiguous and its gradient of its shape and "
              "dtype");
  const int64_t blocks = quant_blocks(param.numel());
  for (const BlockwiseQuantized* s : {&m, &v})
    TITAN_CHECK(s->codes.numel() == param.numel() && s->codes.scalar_type() == at::kByte &&
                    s->codes.is_contiguous() && s->absmax.numel() == blocks &&
                    s->absmax.scalar_type() == at::kFloat && s->absmax.is_contiguous(),
                "AdamW8bit: the 8-bit states must be contiguous uint8 codes shaped like the "
                "parameter and ",
                blocks, " float32 absmax values");
}

}  // namespace

AdamW8bitFloats adamw8bit_floats(const AdamStepScalars& s) {
  AdamW8bitFloats f{};
  f.beta1 = static_cast<float>(s.beta1);
  f.one_minus_beta1 = static_cast<float>(1.0 - s.beta1);
  f.beta2 = static_cast<float>(s.beta2);
  f.one_minus_beta2 = static_cast<float>(1.0 - s.beta2);
  f.bias_correction2_sqrt = static_cast<float>(bias_correction2_sqrt(s));
  f.eps = static_cast<float>(s.eps);
  f.decay = s.weight_decay > 0 ? static_cast<float>(1.0 - s.lr * s.weight_decay) : 1.0f;
  f.step_size = static_cast<float>(-s.lr / bias_correction1(s));
  return f;
}

void adamw8bit_step_fused(at::Tensor& param, const at::Tensor& grad, BlockwiseQuantized& exp_avg,
                          BlockwiseQuantized& exp_avg_sq, const AdamStepScalars& s) {
  check_states(param, grad, exp_avg, exp_avg_sq);
  const at::Tensor g = grad.contiguous();
  if (param.is_cpu()) {
    cpu::adamw8bit_step(param, g, exp_avg, exp_avg_sq, adamw8bit_floats(s));
    return;
  }
#if defined(TITAN_WITH_CUDA)
  if (param.is_cuda()) {
    cuda::adamw8bit_step(param, g, exp_avg.codes, exp_avg.absmax, exp_avg_sq.codes,
                         exp_avg_sq.absmax, adamw8bit_floats(s));
    return;
  }
#endif
  adamw8bit_step_reference(param, grad, exp_avg, exp_avg_sq, s);
}

void adamw8bit_step_reference(at::Tensor& param, const at::Tensor& grad,
                              BlockwiseQuantized& exp_avg, BlockwiseQuantized& exp_avg_sq,
                              const AdamStepScalars& s) {
  check_states(param, grad, exp_avg, exp_avg_sq);
  at::NoGradGuard no_grad;
  at::Tensor m = dequantize_blockwise(exp_avg.codes, exp_avg.absmax, /*is_signed=*/true);
  at::Tensor v = dequantize_blockwise(exp_avg_sq.codes, exp_avg_sq.absmax, /*is_signed=*/false);
  const at::Tensor g = grad.to(at::kFloat);
  // A float32 parameter is updated in place; another dtype through a float32 copy.
  at::Tensor p = param.scalar_type() == at::kFloat ? param : param.to(at::kFloat);
  m.mul_(s.beta1).add_(g, 1.0 - s.beta1);
  v.mul_(s.beta2).addcmul_(g, g, 1.0 - s.beta2);
  const at::Tensor denom = (v.sqrt() / bias_correction2_sqrt(s)).add_(s.eps);
  if (s.weight_decay > 0) p.mul_(1.0 - s.lr * s.weight_decay);
  p.addcdiv_(m, denom, -s.lr / bias_correction1(s));
  if (!p.is_same(param)) param.copy_(p);
  const BlockwiseQuantized m8 = quantize_blockwise(m, /*is_signed=*/true);
  const BlockwiseQuantized v8 = quantize_blockwise(v, /*is_signed=*/false);
  exp_avg.codes.copy_(m8.codes);
  exp_avg.absmax.copy_(m8.absmax);
  exp_avg_sq.codes.copy_(v8.codes);
  exp_avg_sq.absmax.copy_(v8.absmax);
}

void adam_fp32_states_step(at::Tensor& param, const at::Tensor& grad, at::Tensor& exp_avg,
                           at::Tensor& exp_avg_sq, const AdamStepScalars& s) {
  at::NoGradGuard no_grad;
  const at::Tensor g = grad.to(at::kFloat);
  at::Tensor p = param.scalar_type() == at::kFloat ? param : param.to(at::kFloat);
  exp_avg.mul_(s.beta1).add_(g, 1.0 - s.beta1);
  exp_avg_sq.mul_(s.beta2).addcmul_(g, g, 1.0 - s.beta2);
  const double c2 = bias_correction2_sqrt(s);
  const double step_size = -s.lr * c2 / bias_correction1(s);
  if (s.weight_decay > 0) p.mul_(1.0 - s.lr * s.weight_decay);
  const at::Tensor update = exp_avg / (exp_avg_sq.sqrt() + s.eps * c2);
  p.add_(update, step_size);
  if (!p.is_same(param)) param.copy_(p);
}

}  // namespace titan::kernels
