#include "titan/models/common/activation_checkpoint.h"

#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/custom_class.h>

namespace titan::models {
namespace {

// Keeps the block alive from forward until backward inside the autograd context.
struct BlockHolder : torch::CustomClassHolder {
  explicit BlockHolder(Block b) : block(std::move(b)) {}
  Block block;
};

struct CheckpointFunction : public torch::autograd::Function<CheckpointFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            c10::IValue holder) {
    ctx->save_for_backward({x});
    ctx->saved_data["block"] = holder;
    // Autograd functions run forward with grad disabled: nothing inside is recorded.
    return static_cast<BlockHolder*>(holder.toCapsule().get())->block(x);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_out) {
    const at::Tensor x = ctx->get_saved_variables()[0];
    auto* holder = static_cast<BlockHolder*>(ctx->saved_data["block"].toCapsule().get());
    at::Tensor input = x.detach().requires_grad_(x.requires_grad());
    at::Tensor y;
    {
      at::AutoGradMode enable(true);
      y = holder->block(input);
    }
    torch::autograd::backward({y}, {grad_out[0]});
    return {input.requires_grad() ? input.grad() : at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor checkpointed(Block block, const at::Tensor& x) {
  c10::IValue holder =
      c10::IValue::make_capsule(c10::make_intrusive<BlockHolder>(std::move(block)));
  return CheckpointFunction::apply(x, holder);
}

}  // namespace titan::models
