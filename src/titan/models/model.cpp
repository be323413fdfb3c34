#include "titan/models/model.h"

#include <ATen/core/grad_mode.h>

namespace titan::models {

at::Tensor logits(Model& model, const at::Tensor& input_ids) {
  const at::Tensor hidden = model.forward(input_ids).hidden;
  return at::linear(hidden, model.output_weight().to(hidden.scalar_type()));
}

void move_model(Model& model, at::Device device, at::ScalarType param_dtype) {
  at::NoGradGuard no_grad;
  for (auto& [name, p] : model.named_parameters()) {
    if (p.device() != device || p.scalar_type() != param_dtype)
      p.set_data(p.to(device, param_dtype));
  }
  for (auto& [name, b] : model.named_buffers()) {
    if (b.device() != device) b.set_data(b.to(device));
  }
}

}  // namespace titan::models
