#include "titan/models/common/lora.h"

#include <ATen/core/grad_mode.h>

#include <cmath>

#include "titan/common/error.h"
#include "titan/kernels/linear.h"
#include "titan/models/common/activation_checkpoint.h"

namespace titan::models {

std::string lora_prefix(const std::string& weight_name) {
  constexpr std::string_view suffix = ".weight";
  if (weight_name.ends_with(suffix))
    return weight_name.substr(0, weight_name.size() - suffix.size());
  return weight_name;
}

bool is_lora_name(const std::string& name) {
  return name.ends_with(".lora_A.weight") || name.ends_with(".lora_B.weight");
}

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

at::Tensor lora_term(const at::Tensor& x, const LinearAdapter& adapter) {
  const auto dt = x.scalar_type();
  const at::Tensor dropped = adapter.dropout > 0 && is_training_forward()
                                 ? at::dropout(x, adapter.dropout, /*train=*/true)
                                 : x;
  return at::linear(at::linear(dropped, adapter.a.to(dt)), adapter.b.to(dt)) * adapter.scale;
}

at::Tensor adapted_experts(const at::Tensor& weight, const ExpertsAdapter& adapter,
                           at::ScalarType dtype) {
  return (weight + at::bmm(adapter.b, adapter.a) * adapter.scale).to(dtype);
}

at::Tensor Linear::project(const at::Tensor& x) const {
  const auto dt = x.scalar_type();
  at::Tensor y = nf4 ? nf4_linear(x, nf4->resolved()) : kernels::linear(x, weight.to(dt));
  if (adapter) y = y + lora_term(x, *adapter);
  return y;
}

at::Tensor Linear::forward(const at::Tensor& x) const {
  const at::Tensor y = project(x);
  return bias.defined() ? y + bias.to(x.scalar_type()) : y;
}

int64_t Linear::out_features() const { return nf4 ? nf4->weight.rows : weight.size(0); }
int64_t Linear::in_features() const { return nf4 ? nf4->weight.cols : weight.size(-1); }

void initialise_adapter(at::Tensor& a, at::Tensor& b, at::Generator& generator) {
  at::NoGradGuard no_grad;
  const double bound = 1.0 / std::sqrt(static_cast<double>(a.size(-1)));
  at::Tensor init = at::empty(a.sizes(), at::kFloat);
  init.uniform_(-bound, bound, generator);
  a.copy_(init);
  b.zero_();
}

}  // namespace titan::models
