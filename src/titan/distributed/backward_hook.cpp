#include "titan/distributed/backward_hook.h"

#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/custom_class.h>

namespace titan::distributed {
namespace {

struct HookHolder : torch::CustomClassHolder {
  explicit HookHolder(std::function<void()> f) : fn(std::move(f)) {}
  std::function<void()> fn;
};

struct BackwardHookFunction : torch::autograd::Function<BackwardHookFunction> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx,
                                                at::TensorList tensors, c10::IValue holder) {
    ctx->saved_data["hook"] = holder;
    ctx->set_materialize_grads(false);
    // Returning an input makes autograd hand out a view of it with this node as grad_fn.
    return torch::autograd::variable_list(tensors.begin(), tensors.end());
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    static_cast<HookHolder*>(ctx->saved_data["hook"].toCapsule().get())->fn();
    grads.emplace_back();  // nothing for the holder
    return grads;
  }
};

}  // namespace

std::vector<at::Tensor> with_backward_hook(const std::vector<at::Tensor>& tensors,
                                           std::function<void()> hook) {
  if (!at::GradMode::is_enabled()) return tensors;
  std::vector<size_t> hooked;
  std::vector<at::Tensor> through;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const at::Tensor& t = tensors[i];
    if (t.defined() && t.is_floating_point() && t.requires_grad()) {
      hooked.push_back(i);
      through.push_back(t);
    }
  }
  if (through.empty()) return tensors;
  c10::IValue holder = c10::IValue::make_capsule(c10::make_intrusive<HookHolder>(std::move(hook)));
  const std::vector<at::Tensor> out = BackwardHookFunction::apply(at::TensorList(through), holder);
  std::vector<at::Tensor> result = tensors;
  for (size_t j = 0; j < hooked.size(); ++j) result[hooked[j]] = out[j];
  return result;
}

}  // namespace titan::distributed
