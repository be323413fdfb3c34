#include "titan/models/module.h"

namespace titan::models {

NamedTensors Module::named_parameters() {
  NamedTensors out;
  visit_parameters(
      [&](const std::string& name, at::Tensor& slot) { out.emplace_back(name, slot); });
  return out;
}

Tensors Module::parameter_tensors() {
  Tensors out;
  visit_parameters([&](const std::string&, at::Tensor& slot) { out.push_back(slot); });
  return out;
}

void Module::add_wrapper(ForwardWrapper wrapper) { wrappers_.push_back(std::move(wrapper)); }

void Module::add_forward_hooks(std::function<void(Module&)> before,
                               std::function<void(Module&)> after) {
  add_wrapper([before = std::move(before), after = std::move(after)](
                  Module& module, const Tensors& inputs, const ForwardFn& inner) {
    if (before) before(module);
    Tensors outputs = inner(inputs);
    if (after) after(module);
    return outputs;
  });
}

Tensors Module::run_wrapped(const Tensors& inputs, ForwardFn forward) {
  ForwardFn chain = std::move(forward);
  for (const ForwardWrapper& wrapper : wrappers_) {
    chain = [this, wrapper, inner = std::move(chain)](const Tensors& in) {
      return wrapper(*this, in, inner);
    };
  }
  return chain(inputs);
}

}  // namespace titan::models
