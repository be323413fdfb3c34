// The routed experts of a sparse decoder layer (Qwen3-MoE): a softmax top-k router, the experts'
// SwiGLU stacks, and their balancing state (docs/qwen3.md section 2.6; the maths of the
// balancing is common/moe.h).
//
// Call site PATH.moe (PATH the layer's, "layers.N"): moe_router, moe_experts, and under expert
// parallelism moe_dispatch and moe_combine. With an expert group (set_expert_group) the expert
// stacks hold this rank's experts and tokens reach them through dispatch and come back through
// combine. Under tensor parallelism without sequence parallelism every tp rank holds every
// token, so each routes its share (split_tokens) and the results are gathered back.
//
// LoRA on an expert stack (PEFT's ParamWrapper): the experts read W + (B A) * scale.
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <string>

#include "titan/kernels/ops.h"
#include "titan/models/common/lora.h"
#include "titan/models/module.h"
#include "titan/models/parallel_context.h"

namespace titan::kernels {
class OverrideResolver;
}

namespace titan::models {

struct MoeConfig {
  int64_t hidden_size = 0;
  int64_t num_experts = 0;
  int64_t top_k = 0;
  int64_t intermediate_size = 0;  // of each expert (moe_intermediate_size)
  bool norm_topk_prob = false;
};

struct MoeOutput {
  at::Tensor out;            // [N, H]
  at::Tensor router_logits;  // [N', E] (N' = this rank's share under tensor parallelism)
  at::Tensor counts;         // [E] int64 tokens routed to each expert
};

class MoeLayer {
 public:
  // Parameters with `options`; `expert_bias` adds the aux-loss-free balancing buffers, made
  // with `buffer_options` (float32).
  MoeLayer(const MoeConfig& config, const std::string& path, const at::TensorOptions& options,
           bool expert_bias, const at::TensorOptions& buffer_options,
           kernels::OverrideResolver& overrides);

  // x [N, H] (normed tokens) -> the experts' weighted sum for each token.
  MoeOutput forward(const at::Tensor& x) const;

  // Parameters and buffers under `prefix` ("model.layers.N.mlp."): experts.gate_up_proj,
  // experts.down_proj, gate.weight (the router), their adapters; the buffer expert_bias.
  void visit_parameters(const std::string& prefix, const ParameterVisitor& visit);
  void visit_buffers(const std::string& prefix, const ParameterVisitor& visit);

  // The expert stacks by their name in the layer ("mlp.experts.gate_up_proj", ...).
  static constexpr const char* kGateUp = "mlp.experts.gate_up_proj";
  static constexpr const char* kDown = "mlp.experts.down_proj";
  // Adds an uninitialised adapter to the stack named `stack` (kGateUp or kDown).
  void add_adapter(const std::string& stack, const LoraOptions& options,
                   const at::TensorOptions& tensor_options);

  void set_expert_group(kernels::ExpertGroup group) { group_ = std::move(group); }
  void set_tensor_parallel(TensorParallelHooks hooks) { tp_ = std::move(hooks); }
  // Expert-bias balancing: the bias [E] and the tokens routed to each expert since the last
  // update [E] (float32); undefined without it.
  at::Tensor& expert_bias() { return expert_bias_; }
  at::Tensor& tokens_per_expert() { return tokens_per_expert_; }
  const MoeConfig& config() const { return config_; }

 private:
  // The experts on their tokens: all of them here, or this rank's after moe_dispatch.
  at::Tensor routed(const at::Tensor& x, const kernels::Routing& routing) const;

  MoeConfig config_;
  at::Tensor router_, gate_up_, down_;
  std::optional<ExpertsAdapter> gate_up_adapter_, down_adapter_;
  at::Tensor expert_bias_, tokens_per_expert_;
  kernels::MoeRouterFn router_fn_ = nullptr;
  kernels::MoeExpertsFn experts_fn_ = nullptr;
  kernels::MoeDispatchFn dispatch_fn_ = nullptr;
  kernels::MoeCombineFn combine_fn_ = nullptr;
  kernels::ExpertGroup group_;
  TensorParallelHooks tp_;
};

}  // namespace titan::models
