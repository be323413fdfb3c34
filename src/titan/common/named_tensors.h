// NamedTensors: ordered (name, tensor) pairs, the currency between the model, the optimizer,
// checkpoints and the Hugging Face import/export. Order is meaningful (the model's parameter
// order), which is why this is a vector and not a map.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <utility>
#include <vector>

namespace titan {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

}  // namespace titan
