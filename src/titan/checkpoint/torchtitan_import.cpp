#include "titan/checkpoint/torchtitan_import.h"

#include <map>

namespace titan::checkpoint {

TorchtitanCheckpointReader open_torchtitan_checkpoint(models::ModelTensors& model,
                                                      const std::string& dir,
                                                      const std::string& model_description,
                                                      const TensorLayout& layout) {
  // The whole model's shapes (meta tensors), a pipeline stage's other parts included.
  std::map<std::string, std::vector<int64_t>> global;
  for (const auto& [name, p] : model.named_parameters())
    global[name] = layout.piece(name, p).global_shape;
  NamedTensors expected;
  for (const auto& [name, t] : model.initialisation_order()) {
    auto it = global.find(name);
    expected.emplace_back(name, at::empty(it != global.end() ? it->second : t.sizes().vec(),
                                          t.options().device(at::kMeta)));
  }
  NamedTensors expected_buffers;
  for (const auto& [name, b] : model.named_buffers())
    expected_buffers.emplace_back(name, at::empty(b.sizes(), b.options().device(at::kMeta)));
  return TorchtitanCheckpointReader(dir, expected, expected_buffers, model.hf_config("float32"),
                                    model_description);
}

}  // namespace titan::checkpoint
