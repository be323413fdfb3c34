#include "titan/models/common/activation_checkpoint.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/custom_class.h>

#include "titan/common/error.h"
#include "titan/config/validate.h"

namespace titan::models {
namespace {

// Set while a module wrapped for op-level selective checkpointing runs its forward.
thread_local bool op_level_selective = false;
// How many checkpointed forwards (run without autograd, recomputed with it) are running.
thread_local int checkpointed_forwards = 0;

// The random state a forward starts from, for its recomputation to draw the same numbers
// (LoRA's dropout masks), as PyTorch's checkpoint does with preserve_rng_state: the CPU
// generator's, and the CUDA one's of the inputs' device.
struct RngStates {
  at::Tensor cpu, cuda;
  int cuda_device = -1;
};

at::Generator cuda_generator(int device) {
  return at::globalContext().defaultGenerator(c10::Device(c10::kCUDA, device));
}

at::Tensor state_of(at::Generator gen) {
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void set_state(at::Generator gen, const at::Tensor& state) {
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

RngStates capture_rng(const at::TensorList& inputs) {
  RngStates s;
  s.cpu = state_of(at::detail::getDefaultCPUGenerator());
  for (const at::Tensor& t : inputs) {
    if (t.defined() && t.is_cuda()) {
      s.cuda_device = t.device().index();
      s.cuda = state_of(cuda_generator(s.cuda_device));
      break;
    }
  }
  return s;
}

// Sets `saved` for the life of the object, then puts back what was there.
class RngFork {
 public:
  explicit RngFork(const RngStates& saved) {
    now_.cpu = state_of(at::detail::getDefaultCPUGenerator());
    set_state(at::detail::getDefaultCPUGenerator(), saved.cpu);
    if (saved.cuda.defined()) {
      now_.cuda_device = saved.cuda_device;
      now_.cuda = state_of(cuda_generator(saved.cuda_device));
      set_state(cuda_generator(saved.cuda_device), saved.cuda);
    }
  }
  ~RngFork() {
    set_state(at::detail::getDefaultCPUGenerator(), now_.cpu);
    if (now_.cuda.defined()) set_state(cuda_generator(now_.cuda_device), now_.cuda);
  }
  RngFork(const RngFork&) = delete;
  RngFork& operator=(const RngFork&) = delete;

 private:
  RngStates now_;
};

// Keeps the forward alive from forward until backward inside the autograd context.
struct ForwardHolder : torch::CustomClassHolder {
  explicit ForwardHolder(ForwardFn f) : fn(std::move(f)) {}
  ForwardFn fn;
};

struct CheckpointFunction : public torch::autograd::Function<CheckpointFunction> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx,
                                                at::TensorList inputs, at::TensorList params,
                                                c10::IValue holder) {
    Tensors saved(inputs.begin(), inputs.end());
    saved.insert(saved.end(), params.begin(), params.end());
    ctx->save_for_backward(saved);
    ctx->saved_data["holder"] = holder;
    ctx->saved_data["num_inputs"] = static_cast<int64_t>(inputs.size());
    const RngStates rng = capture_rng(inputs);
    ctx->saved_data["cpu_rng"] = rng.cpu;
    if (rng.cuda.defined()) {
      ctx->saved_data["cuda_rng"] = rng.cuda;
      ctx->saved_data["cuda_device"] = static_cast<int64_t>(rng.cuda_device);
    }
    // Unused outputs arrive as undefined gradients instead of materialised zeros.
    ctx->set_materialize_grads(false);
    // Autograd functions run forward with grad disabled: nothing inside is recorded.
    ++checkpointed_forwards;
    try {
      Tensors out = static_cast<ForwardHolder*>(holder.toCapsule().get())
                        ->fn(Tensors(inputs.begin(), inputs.end()));
      --checkpointed_forwards;
      return out;
    } catch (...) {
      --checkpointed_forwards;
      throw;
    }
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const Tensors saved = ctx->get_saved_variables();
    const auto num_inputs = static_cast<size_t>(ctx->saved_data["num_inputs"].toInt());
    auto* holder = static_cast<ForwardHolder*>(ctx->saved_data["holder"].toCapsule().get());

    // Fresh leaves for the inputs; the parameters are used as they are (they are what fn reads).
    Tensors inputs;
    for (size_t i = 0; i < num_inputs; ++i) {
      const at::Tensor& x = saved[i];
      inputs.push_back(x.detach().requires_grad_(x.requires_grad()));
    }
    RngStates rng;
    rng.cpu = ctx->saved_data["cpu_rng"].toTensor();
    if (ctx->saved_data.count("cuda_rng")) {
      rng.cuda = ctx->saved_data["cuda_rng"].toTensor();
      rng.cuda_device = static_cast<int>(ctx->saved_data["cuda_device"].toInt());
    }
    Tensors outputs;
    {
      at::AutoGradMode enable(true);
      const RngFork fork(rng);  // the forward's random numbers again
      outputs = holder->fn(inputs);
    }
    Tensors roots, root_grads;
    for (size_t i = 0; i < outputs.size() && i < grad_outputs.size(); ++i) {
      if (outputs[i].defined() && outputs[i].requires_grad() && grad_outputs[i].defined()) {
        roots.push_back(outputs[i]);
        root_grads.push_back(grad_outputs[i]);
      }
    }
    // One gradient per forward argument: each input, each parameter, then the holder.
    torch::autograd::variable_list result(saved.size() + 1);
    Tensors wrt;
    std::vector<size_t> wrt_index;
    for (size_t i = 0; i < saved.size(); ++i) {
      const at::Tensor& t = i < num_inputs ? inputs[i] : saved[i];
      if (t.requires_grad()) {
        wrt.push_back(t);
        wrt_index.push_back(i);
      }
    }
    if (roots.empty() || wrt.empty()) return result;
    const Tensors grads = torch::autograd::grad(roots, wrt, root_grads, /*retain_graph=*/false,
                                                /*create_graph=*/false, /*allow_unused=*/true);
    for (size_t j = 0; j < wrt.size(); ++j) result[wrt_index[j]] = grads[j];
    return result;
  }
};

// Turns op_level_selective on for the forward of the module it wraps.
Tensors op_level_wrapper(Module&, const Tensors& inputs, const ForwardFn& inner) {
  const bool previous = op_level_selective;
  op_level_selective = true;
  try {
    Tensors out = inner(inputs);
    op_level_selective = previous;
    return out;
  } catch (...) {
    op_level_selective = previous;
    throw;
  }
}

Tensors block_wrapper(Module& module, const Tensors& inputs, const ForwardFn& inner) {
  return checkpointed(inner, inputs, module.parameter_tensors());
}

}  // namespace

bool is_training_forward() { return at::GradMode::is_enabled() || checkpointed_forwards > 0; }

Tensors checkpointed(ForwardFn fn, const Tensors& inputs, const Tensors& params) {
  if (!at::GradMode::is_enabled()) return fn(inputs);
  c10::IValue holder = c10::IValue::make_capsule(c10::make_intrusive<ForwardHolder>(std::move(fn)));
  return CheckpointFunction::apply(at::TensorList(inputs), at::TensorList(params), holder);
}

Tensors recompute_if_selective(ForwardFn fn, const Tensors& inputs, const Tensors& params) {
  if (!op_level_selective || !at::GradMode::is_enabled()) return fn(inputs);
  return checkpointed(std::move(fn), inputs, params);
}

void apply_activation_checkpointing(const std::vector<Module*>& blocks,
                                    const config::ActivationCheckpointConfig& ac) {
  config::check_one_of("activation_checkpoint.mode", ac.mode, {"none", "selective", "full"});
  if (ac.mode == "none") return;
  if (ac.mode == "full") {
    for (Module* block : blocks) block->add_wrapper(block_wrapper);
    return;
  }
  const int64_t every = config::selective_ac_frequency(ac.selective_ac_option);
  if (every == 0) {  // "op"
    for (Module* block : blocks) block->add_wrapper(op_level_wrapper);
    return;
  }
  // torchtitan counts blocks from one: with N = 2, the 2nd, 4th, ... block is recomputed.
  for (size_t i = 0; i < blocks.size(); ++i)
    if ((static_cast<int64_t>(i) + 1) % every == 0) blocks[i]->add_wrapper(block_wrapper);
}

}  // namespace titan::models
