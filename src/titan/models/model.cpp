#include "titan/models/model.h"

#include <ATen/core/grad_mode.h>

#include "titan/common/error.h"

namespace titan::models {

ModelOutput Model::forward_packed(const at::Tensor& input_ids, const PackedDocuments& documents) {
  TITAN_CHECK(!documents.document_ids.defined(),
              "this model backend has no block-causal attention: training.document_masking "
              "needs a native model (model.name = \"qwen3\" or \"llama3\")");
  TITAN_CHECK(!documents.positions.defined(),
              "this model backend takes no token positions: context parallelism needs a native "
              "model (model.name = \"qwen3\" or \"llama3\")");
  return forward(input_ids);
}

void ModelTensors::initialise_parameter(const std::string& name, at::Tensor& value,
                                        at::Generator&) {
  TITAN_CHECK(false, "this model backend does not initialise ", name,
              " itself (its weights come from its own loader)");
}

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
