#include "titan/models/materialize.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>

#include "titan/common/error.h"
#include "titan/models/common/lora.h"

namespace titan::models {
namespace {

// Whether `value` can become the parameter itself: the wanted dtype and device, contiguous,
// and no other tensor shares its storage (a file's view or a buffer the source reuses does).
bool owned_as_is(const at::Tensor& value, const at::TensorOptions& where) {
  return value.scalar_type() == where.dtype().toScalarType() && value.device() == where.device() &&
         value.is_contiguous() && !value.is_view() && value.storage_offset() == 0 &&
         value.storage().use_count() == 1;
}

}  // namespace

void materialize(Model& model, const ParameterSource& source, const MaterializeOptions& options) {
  at::NoGradGuard no_grad;
  for (Module* module : model.modules()) {
    bool touched = false;
    module->visit_parameters([&](const std::string& name, at::Tensor& slot) {
      if (!slot.is_meta()) return;
      touched = true;
      const bool grad = slot.requires_grad();
      const at::ScalarType dtype = options.dtype ? options.dtype(name) : slot.scalar_type();
      const at::TensorOptions where = at::TensorOptions(options.device).dtype(dtype);
      const at::Tensor value = source ? source(name, slot) : at::Tensor();
      if (value.defined()) {
        TITAN_CHECK(value.sizes() == slot.sizes(), "the value for ", name, " has shape ",
                    value.sizes(), ", the model expects ", slot.sizes());
        if (owned_as_is(value, where)) {
          slot = value;
        } else {
          at::Tensor stored = at::empty(slot.sizes(), where);
          stored.copy_(value);
          slot = stored;
        }
      } else {
        slot = at::empty(slot.sizes(), where);
      }
      slot.requires_grad_(grad);
      if (options.after_parameter) options.after_parameter(name, slot);
    });
    if (touched && options.after_module) options.after_module();
  }
  for (const auto& [name, p] : model.named_parameters())
    TITAN_CHECK(!p.is_meta(), "materialize: parameter ", name,
                " belongs to no module of the model, so it was not given storage");
}

ParameterSource seeded_initialisation(ModelTensors& model, uint64_t seed) {
  // The generator walks the model's whole initialisation order: values of parameters this model
  // does not hold (another pipeline stage's) are drawn and dropped, so every value is the one a
  // whole model built with this seed has.
  struct Walk {
    at::Generator gen;
    std::vector<std::pair<std::string, std::vector<int64_t>>> order;
    size_t next = 0;
  };
  auto walk = std::make_shared<Walk>();
  walk->gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  // (LoRA's adapters are no part of it: they have their own initialisation.)
  for (const auto& [name, t] : model.initialisation_order())
    if (!is_lora_name(name)) walk->order.emplace_back(name, t.sizes().vec());
  ModelTensors* m = &model;
  return [walk, m](const std::string& name, const at::Tensor&) {
    while (walk->next < walk->order.size()) {
      const auto& [next_name, shape] = walk->order[walk->next++];
      // Drawn in float32 on the CPU, as the whole-model initialisation draws it.
      at::Tensor value = at::empty(shape, at::kFloat);
      m->initialise_parameter(next_name, value, walk->gen);
      if (next_name == name) return value;
    }
    fail("seeded initialisation: ", name, " is not in the model's initialisation order");
  };
}

bool has_meta_parameters(ModelTensors& model) {
  for (const auto& [name, p] : model.named_parameters())
    if (p.is_meta()) return true;
  return false;
}

}  // namespace titan::models
