// Module: a unit of a model that code outside the model can wrap (the seam FSDP, activation
// checkpointing and hooks attach to, as torchtitan applies fully_shard and checkpoint_wrapper
// to transformer blocks from outside).
//
// A module owns a group of parameters, named as in the Hugging Face checkpoint, and exposes
// them as slots: the tensor in a slot is what the next forward reads, so a wrapper may put an
// all-gathered copy there before the forward and the shard back after it. Its forward runs
// through a chain of wrappers; each receives the inputs and the inner forward and returns the
// outputs, and may run code before and after it or run it differently (recompute it in
// backward). The model never knows what wraps its modules.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <string>
#include <vector>

#include "titan/common/named_tensors.h"

namespace titan::models {

using Tensors = std::vector<at::Tensor>;
using ForwardFn = std::function<Tensors(const Tensors& inputs)>;

class Module;
// A wrapper around a module's forward. `inner` is the rest of the chain (ending in the
// module's own computation); a wrapper that keeps it (to recompute in backward) must copy it.
using ForwardWrapper =
    std::function<Tensors(Module& module, const Tensors& inputs, const ForwardFn& inner)>;
// Called with each parameter's full name and its slot.
using ParameterVisitor = std::function<void(const std::string& name, at::Tensor& slot)>;

class Module {
 public:
  // `path` is the module path that override globs and wrappers see, e.g. "layers.3".
  explicit Module(std::string path) : path_(std::move(path)) {}
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  const std::string& path() const { return path_; }

  // Every trainable parameter of this unit, in the model's parameter order.
  virtual void visit_parameters(const ParameterVisitor& visit) = 0;
  // Non-trainable state that belongs in checkpoints (e.g. MoE expert biases).
  virtual void visit_buffers(const ParameterVisitor& visit) {}
  NamedTensors named_parameters();
  // The tensors currently in the parameter slots (what a forward would read).
  Tensors parameter_tensors();

  // Adds a wrapper outside every wrapper added before it.
  void add_wrapper(ForwardWrapper wrapper);
  // Runs before(module) and after(module) around each forward, outside the wrappers added so
  // far. Under a recomputing wrapper added later, they run once per forward, not again in the
  // recomputation.
  void add_forward_hooks(std::function<void(Module&)> before, std::function<void(Module&)> after);
  size_t num_wrappers() const { return wrappers_.size(); }
  void clear_wrappers() { wrappers_.clear(); }

 protected:
  // Runs `forward` (the module's own computation) through the wrapper chain. `forward` must
  // read the parameter slots when it runs (a wrapper swaps their tensors before calling it) and
  // capture everything else by value (a wrapper may call it again during backward).
  Tensors run_wrapped(const Tensors& inputs, ForwardFn forward);

 private:
  std::string path_;
  std::vector<ForwardWrapper> wrappers_;
};

}  // namespace titan::models
