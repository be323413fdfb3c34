#include "titan/models/common/lora.h"

#include <ATen/core/grad_mode.h>

#include <cmath>

#include "titan/common/error.h"
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

std::string lora_base_name(const std::string& adapter_name, bool linear) {
  TITAN_CHECK(is_lora_name(adapter_name), adapter_name, " is not a LoRA adapter's name");
  const std::string prefix =
      adapter_name.substr(0, adapter_name.size() - std::string_view(".lora_A.weight").size());
  return linear ? prefix + ".weight" : prefix;
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

void initialise_adapter(at::Tensor& a, at::Tensor& b, at::Generator& generator) {
  at::NoGradGuard no_grad;
  const double bound = 1.0 / std::sqrt(static_cast<double>(a.size(-1)));
  at::Tensor init = at::empty(a.sizes(), at::kFloat);
  init.uniform_(-bound, bound, generator);
  a.copy_(init);
  b.zero_();
}

}  // namespace titan::models
