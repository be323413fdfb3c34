#include "titan/models/common/linear.h"

#include <ATen/core/grad_mode.h>

#include "titan/common/error.h"
#include "titan/kernels/linear.h"

namespace titan::models {

kernels::Nf4Weight Nf4Base::resolved() const {
  if (!scales) return weight;
  kernels::Nf4Weight w = weight;
  w.absmax = kernels::dequantize_scales(*scales).to(weight.packed.device());
  return w;
}

int64_t Nf4Base::bytes() const {
  int64_t n = weight.packed.numel();
  if (weight.absmax.defined()) n += weight.absmax.numel() * 4;
  if (scales) n += scales->codes.numel() + scales->absmax.numel() * 4 + 4;
  return n;
}

void Nf4Base::move_to(at::Device device) {
  weight.packed = weight.packed.to(device);
  if (weight.absmax.defined()) weight.absmax = weight.absmax.to(device);
  if (scales) {
    scales->codes = scales->codes.to(device);
    scales->absmax = scales->absmax.to(device);
    scales->offset = scales->offset.to(device);
  }
}

Nf4Base quantize_base(const at::Tensor& weight, bool double_quantization) {
  Nf4Base base;
  base.weight = kernels::quantize_nf4(weight);
  if (double_quantization) {
    base.scales = kernels::quantize_scales(base.weight.absmax);
    base.weight.absmax = at::Tensor();
  }
  base.move_to(weight.device());
  return base;
}

at::Tensor dequantize_base(const Nf4Base& base, at::ScalarType dtype) {
  return kernels::dequantize_nf4(base.resolved(), dtype);
}

at::Tensor Linear::project(const at::Tensor& x) const {
  // kernels::linear casts the (float32 master) weight to x's dtype itself, or multiplies by it
  // as it is (AMX, kernels/cpu/amx_linear.h).
  at::Tensor y = nf4 ? nf4_linear(x, nf4->resolved()) : kernels::linear(x, weight);
  if (adapter) y = y + lora_term(x, *adapter);
  return y;
}

at::Tensor Linear::forward(const at::Tensor& x) const {
  if (plain()) return kernels::linear(x, weight, bias);
  const at::Tensor y = project(x);
  return bias.defined() ? y + bias.to(x.scalar_type()) : y;
}

int64_t Linear::out_features() const { return nf4 ? nf4->weight.rows : weight.size(0); }
int64_t Linear::in_features() const { return nf4 ? nf4->weight.cols : weight.size(-1); }

void Linear::visit(const std::string& name, const ParameterVisitor& f) {
  const std::string weight_name = name + ".weight";
  if (weight.defined()) f(weight_name, weight);
  if (bias.defined()) f(name + ".bias", bias);
  if (adapter) {
    f(lora_a_name(weight_name), adapter->a);
    f(lora_b_name(weight_name), adapter->b);
  }
}

int64_t Linear::quantize(bool double_quantization) {
  TITAN_CHECK(weight.defined() && !weight.is_meta(),
              "QLoRA: a projection weight must have its value before it is held in NF4");
  TITAN_CHECK(!weight.requires_grad(), "QLoRA: a trained weight cannot be held in NF4");
  at::NoGradGuard no_grad;
  nf4 = quantize_base(weight, double_quantization);
  weight = at::Tensor();
  return nf4->bytes();
}

void Linear::add_adapter(const LoraOptions& options, const at::TensorOptions& tensor_options) {
  LinearAdapter a;
  a.a = at::empty({options.rank, in_features()}, tensor_options);
  a.b = at::empty({out_features(), options.rank}, tensor_options);
  a.scale = options.scale();
  a.dropout = options.dropout;
  adapter = std::move(a);
}

}  // namespace titan::models
