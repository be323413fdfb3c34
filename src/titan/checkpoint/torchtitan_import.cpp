#include "titan/checkpoint/torchtitan_import.h"

#include <ATen/core/grad_mode.h>

#include <map>

#include "titan/checkpoint/torchtitan_checkpoint.h"
#include "titan/common/box_tensor.h"

namespace titan::checkpoint {

std::vector<std::string> load_torchtitan_weights(models::Model& model, const std::string& dir,
                                                 const std::string& model_description,
                                                 const TensorLayout& layout) {
  const NamedTensors params = model.named_parameters();
  const NamedTensors buffers = model.named_buffers();
  // The whole model's shapes (meta tensors), a pipeline stage's other parts included.
  std::map<std::string, std::vector<int64_t>> global;
  for (const auto& [name, p] : params) global[name] = layout.piece(name, p).global_shape;
  NamedTensors expected;
  for (const auto& [name, t] : model.initialisation_order()) {
    auto it = global.find(name);
    expected.emplace_back(name, at::empty(it != global.end() ? it->second : t.sizes().vec(),
                                          t.options().device(at::kMeta)));
  }
  NamedTensors expected_buffers;
  for (const auto& [name, b] : buffers)
    expected_buffers.emplace_back(name, at::empty(b.sizes(), b.options().device(at::kMeta)));
  const TorchtitanCheckpointReader reader(dir, expected, expected_buffers,
                                          model.hf_config("float32"), model_description);
  at::NoGradGuard no_grad;
  for (const auto& [name, target] : params) {
    const at::Tensor full = reader.model_tensor(name);
    const LocalPiece piece = layout.piece(name, target);
    if (piece.whole) {
      at::Tensor t = target;
      t.copy_(full);
      continue;
    }
    at::Tensor t = target;
    t.zero_();  // the padding
    real_part(t, piece.box).copy_(narrow_to(full, whole_box(piece.global_shape), piece.box));
  }
  for (const auto& [name, target] : buffers) {
    at::Tensor t = target;
    t.copy_(reader.model_tensor(name));
  }
  return reader.notes();
}

}  // namespace titan::checkpoint
