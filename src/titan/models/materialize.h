// Materializing a model built with BuildOptions::meta_parameters: its parameters exist only
// as shapes on the meta device until they are given storage here, one at a time, in the
// model's order, each straight in the dtype and on the device it will keep. So a model to be
// loaded is never initialised first, a bfloat16 model never exists in float32, and QLoRA's
// base never exists whole in full precision (lora/lora_model.h quantises each projection as
// it arrives).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <string>

#include "titan/models/model.h"

namespace titan::models {

// The value of one parameter, asked for once per parameter in the model's order, `meta` giving
// its shape and dtype: a tensor of that shape in any dtype and on any device (it is converted),
// or undefined to leave the storage uninitialised (a load fills it later).
using ParameterSource = std::function<at::Tensor(const std::string& name, const at::Tensor& meta)>;

struct MaterializeOptions {
  at::Device device = at::kCPU;
  // The dtype a parameter is stored in; unset: its meta dtype.
  std::function<at::ScalarType(const std::string& name)> dtype;
  // Called with each parameter once its slot holds its value (a slot it empties is fine).
  std::function<void(const std::string& name, at::Tensor& slot)> after_parameter;
  // Called after each module's parameters (a load drops the file pages it read).
  std::function<void()> after_module;
};

// Gives every meta parameter of `model` its storage and value from `source` (nullptr: every
// value uninitialised), module by module. Parameters that already have storage (adapters added
// for real) are left alone, and `source` is not asked for them. requires_grad is kept.
void materialize(Model& model, const ParameterSource& source, const MaterializeOptions& options);

// The model's own initialisation (Model::initialise_parameter) from a generator seeded with
// `seed`, value after value: the values a model built with init_weights and that seed has.
ParameterSource seeded_initialisation(ModelTensors& model, uint64_t seed);

// Whether any parameter of `model` is still on the meta device.
bool has_meta_parameters(ModelTensors& model);

}  // namespace titan::models
