#include "titan/checkpoint/model_tensors.h"

#include <ATen/core/grad_mode.h>

#include <map>

#include "titan/common/error.h"
#include "titan/common/strings.h"

namespace titan::checkpoint {

NamedTensors model_tensors(models::ModelTensors& model) {
  NamedTensors out = model.named_parameters();
  for (auto& b : model.named_buffers()) out.push_back(b);
  return out;
}

void load_into_model(models::ModelTensors& model, const NamedTensors& tensors,
                     const std::string& source) {
  load_into(model_tensors(model), tensors, source);
}

void load_into(const NamedTensors& target_list, const NamedTensors& tensors,
               const std::string& source) {
  std::map<std::string, at::Tensor> targets;
  for (const auto& [name, t] : target_list) targets[name] = t;
  std::map<std::string, at::Tensor> given;
  for (const auto& [name, t] : tensors) {
    auto it = targets.find(name);
    TITAN_CHECK(it != targets.end(), source, ": unexpected tensor '", name, "'");
    TITAN_CHECK(it->second.sizes() == t.sizes(), source, ": tensor '", name, "' has shape ",
                shape_to_string(t.sizes()), " but the model expects ",
                shape_to_string(it->second.sizes()));
    given[name] = t;
  }
  for (const auto& [name, target] : targets)
    TITAN_CHECK(given.count(name) > 0, source, ": missing tensor '", name, "'");
  at::NoGradGuard no_grad;
  for (auto& [name, target] : targets) target.copy_(given[name]);
}

}  // namespace titan::checkpoint
