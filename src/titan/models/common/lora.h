// LoRA on a native model's weights (docs/lora.md), computed as PEFT computes it:
//
//   a linear weight W [out, in] (PEFT's lora.Linear): y = W x + (B (A dropout(x))) * alpha / r,
//     A [r, in], B [out, r];
//   a stack of expert weights W [E, out, in] (PEFT's ParamWrapper on a fused MoE parameter): the
//     forward reads W[e] + (B[e] A[e]) * alpha / r for every expert e, A [E, r, in],
//     B [E, out, r] (expert-major, so that expert parallelism splits them on dim 0 as it splits
//     W; PEFT's files hold them as [E*r, in] and [out, r*E], lora/peft_adapter.h).
//
// The base weight is frozen. A frozen linear weight may also be held in NF4 (QLoRA: then it is
// no parameter at all, only the packed codes and scales, read through the nf4_linear op); the
// projection that hosts both is common/linear.h.
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <string>

#include "titan/kernels/ops.h"

namespace titan::models {

struct LoraOptions {
  int64_t rank = 8;
  double alpha = 16;
  double dropout = 0;
  double scale() const { return alpha / static_cast<double>(rank); }
};

// Native names of an adapter's tensors: for a linear weight "P.weight", "P.lora_A.weight" and
// "P.lora_B.weight"; for an expert stack "P.gate_up_proj", "P.gate_up_proj.lora_A.weight"...
std::string lora_prefix(const std::string& weight_name);
inline std::string lora_a_name(const std::string& weight_name) {
  return lora_prefix(weight_name) + ".lora_A.weight";
}
inline std::string lora_b_name(const std::string& weight_name) {
  return lora_prefix(weight_name) + ".lora_B.weight";
}
// Whether a native parameter name is an adapter's.
bool is_lora_name(const std::string& name);
// The base weight an adapter tensor belongs to ("P.lora_A.weight" -> "P.weight"; for an expert
// stack "P.gate_up_proj.lora_B.weight" -> "P.gate_up_proj"): lora_a_name and lora_b_name
// inverted. Throws for a name that is not an adapter's. `linear`: the base is a linear weight
// (the adapters of both kinds are named alike; the model knows which it holds).
std::string lora_base_name(const std::string& adapter_name, bool linear);

struct LinearAdapter {
  at::Tensor a;  // slot [r, in]
  at::Tensor b;  // slot [out, r]
  double scale = 1;
  double dropout = 0;
};

struct ExpertsAdapter {
  at::Tensor a;  // slot [E, r, in]
  at::Tensor b;  // slot [E, out, r]
  double scale = 1;
};

// The adapter's term for input x: (B (A dropout(x))) * scale, in x's dtype. Dropout applies
// only in training forwards (is_training_forward()), as PEFT's nn.Dropout in train mode.
at::Tensor lora_term(const at::Tensor& x, const LinearAdapter& adapter);
// W + (B A) * scale per expert, in `dtype` (the weight the experts' kernel then reads).
at::Tensor adapted_experts(const at::Tensor& weight, const ExpertsAdapter& adapter,
                           at::ScalarType dtype);

// PEFT's initialisation: A Kaiming-uniform (a = sqrt(5): bound 1 / sqrt(in)), B zeros, from
// `generator`, in float32, then cast to the slots' dtype in place.
void initialise_adapter(at::Tensor& a, at::Tensor& b, at::Generator& generator);

}  // namespace titan::models
