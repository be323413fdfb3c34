// Linear: one projection of a decoder (docs/architecture.md, "The model room"): its weight
// [out, in], an optional bias [out], an optional LoRA adapter (common/lora.h holds the LoRA
// maths) and, once frozen under QLoRA, the weight held in NF4 instead (kernels/nf4.h), read
// through the nf4_linear op chosen for its call site.
//
// The tensors are slots: a wrapper (FSDP) may put another tensor in them between forwards, so
// the computation reads them when it runs.
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <string>

#include "titan/kernels/nf4.h"
#include "titan/kernels/ops.h"
#include "titan/models/common/lora.h"
#include "titan/models/module.h"

namespace titan::models {

// A frozen weight in NF4, its scales optionally quantised again (kernels/nf4.h).
struct Nf4Base {
  kernels::Nf4Weight weight;  // absmax undefined when the scales are double-quantised
  std::optional<kernels::QuantizedScales> scales;
  // The weight as nf4_linear reads it (the scales dequantised, on the weight's device).
  kernels::Nf4Weight resolved() const;
  int64_t bytes() const;
  void move_to(at::Device device);
};
Nf4Base quantize_base(const at::Tensor& weight, bool double_quantization);
at::Tensor dequantize_base(const Nf4Base& base, at::ScalarType dtype);

struct Linear {
  at::Tensor weight;  // [out, in]; undefined once held in NF4
  at::Tensor bias;    // [out] or undefined
  std::optional<LinearAdapter> adapter;
  std::optional<Nf4Base> nf4;
  kernels::Nf4LinearFn nf4_linear = nullptr;  // the kernel chosen for this call site

  // x W^T plus the adapter's term, in x's dtype, without the bias (row-parallel layers add it
  // after summing over tensor-parallel ranks).
  at::Tensor project(const at::Tensor& x) const;
  at::Tensor forward(const at::Tensor& x) const;  // with the bias
  bool plain() const { return !adapter && !nf4; }
  int64_t out_features() const;
  int64_t in_features() const;

  // Its parameters under `name` (the module's Hugging Face path, "model.layers.0.mlp.up_proj"):
  // NAME.weight (not once it is held in NF4), NAME.bias, and the adapter's NAME.lora_A.weight
  // and NAME.lora_B.weight.
  void visit(const std::string& name, const ParameterVisitor& visit);
  // QLoRA: holds the (frozen) weight in NF4 from now on; returns the bytes it takes.
  int64_t quantize(bool double_quantization);
  // Adds an uninitialised adapter of rank `options.rank`, made with `tensor_options`.
  void add_adapter(const LoraOptions& options, const at::TensorOptions& tensor_options);
};

}  // namespace titan::models
