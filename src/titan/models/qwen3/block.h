// One decoder layer of Qwen3 / Qwen3-MoE (docs/qwen3.md): pre-norm attention with q/k norms
// and rotary embedding, then a pre-norm SwiGLU MLP or routed experts, each added to the
// residual.
//
// A Module (module.h) at path "layers.N": its parameters keep their Hugging Face names
// (model.layers.N....), its forward runs through the wrappers parallelize() adds, and the
// implementation of every op it calls was chosen once, when it was built, at these call sites:
//   layers.N.attention_norm      rms_norm (input_layernorm)
//   layers.N.attention.q_norm    rms_norm
//   layers.N.attention.k_norm    rms_norm
//   layers.N.attention           rope, attention
//   layers.N.ffn_norm            rms_norm (post_attention_layernorm)
//   layers.N.feed_forward        swiglu (dense layers)
//   layers.N.moe                 moe_router, moe_experts (sparse layers), and under expert
//                                parallelism moe_dispatch, moe_combine
//
// Under tensor parallelism (set_tensor_parallel) the slots hold this rank's heads and MLP
// columns (q/k/v and gate/up split on dim 0, o_proj and down on dim 1), the block calls the
// hooks at the edges of each parallel region, and the sparse layers route this rank's share of
// the tokens. Under expert parallelism (set_expert_group) the expert slots hold this rank's
// experts, and tokens reach them through moe_dispatch and come back through moe_combine.
//
// LoRA (common/lora.h, docs/lora.md): any of the seven projections and the two expert stacks
// may carry an adapter, whose tensors are parameters of the block next to their base weight;
// a frozen projection may be held in NF4 (QLoRA), read through nf4_linear at
//   layers.N.attention.{q,k,v,o}_proj   layers.N.feed_forward.{gate,up,down}_proj
// A dense MLP with an adapted or quantised projection runs as three projections and silu, not
// through the swiglu op.
#pragma once

#include <ATen/ATen.h>

#include <string>

#include "titan/kernels/ops.h"
#include "titan/models/common/lora.h"
#include "titan/models/common/rope.h"
#include "titan/models/module.h"
#include "titan/models/parallel_context.h"
#include "titan/models/qwen3/qwen3_args.h"

namespace titan::kernels {
class OverrideResolver;
}

namespace titan::models {

struct Qwen3BlockOutput {
  at::Tensor hidden;         // [B, S, H]
  at::Tensor router_logits;  // [B*S, E] (sparse layers; for the aux loss)
  at::Tensor expert_counts;  // [E] int64 tokens routed to each expert (sparse layers)
};

class Qwen3Block : public Module {
 public:
  // Allocates the parameters (uninitialised) with `options` (the meta device: shapes only);
  // `with_expert_bias` adds the aux-loss-free balancing buffers of a sparse layer, made with
  // `buffer_options`.
  Qwen3Block(const Qwen3Args& args, int64_t index, bool with_expert_bias,
             const at::TensorOptions& options, const at::TensorOptions& buffer_options,
             kernels::OverrideResolver& overrides);

  // Training / evaluation forward of h [B, S, H] (through the wrappers). `rope` holds cos/sin
  // [S, d], or [B, 1, S, d] for packed documents, whose `document_ids` [B, S] (undefined for
  // plain causal rows) make attention block-causal.
  Qwen3BlockOutput forward(const at::Tensor& h, const RopeTables& rope,
                           const at::Tensor& document_ids = {});
  // Decoding: h holds the new tokens, `keys`/`values` this layer's cache (undefined when
  // empty), extended in place. No wrappers, no autograd.
  at::Tensor forward_cached(const at::Tensor& h, const RopeTables& rope, at::Tensor& keys,
                            at::Tensor& values);

  void visit_parameters(const ParameterVisitor& visit) override;
  void visit_buffers(const ParameterVisitor& visit) override;

  // LoRA. The weights an adapter may target, by native parameter name, with their module's
  // Hugging Face path and whether they are an expert stack.
  struct AdaptableWeight {
    std::string name;    // "model.layers.0.self_attn.q_proj.weight", "...mlp.experts.down_proj"
    std::string module;  // "model.layers.0.self_attn.q_proj", "...mlp.experts.down_proj"
    bool experts = false;
  };
  std::vector<AdaptableWeight> adaptable_weights() const;
  // Adds an (uninitialised) adapter to the weight of that native name, in `options` dtype.
  void add_adapter(const std::string& weight_name, const LoraOptions& lora,
                   const at::TensorOptions& options);
  // Holds every frozen projection weight (requires_grad false) in NF4 from now on; the others
  // stay. Returns the bytes the NF4 weights take.
  int64_t quantize_frozen_projections(bool double_quantization);
  // The projection whose weight has this native name, or nullptr (QLoRA's unit of work).
  Linear* projection_weighted(const std::string& weight_name);
  // The NF4 weights by native name, with their [out, in] shapes.
  std::vector<std::pair<std::string, std::vector<int64_t>>> nf4_weights() const;

  bool sparse() const { return sparse_; }
  void set_tensor_parallel(TensorParallelHooks hooks) { tp_ = std::move(hooks); }
  void set_expert_group(kernels::ExpertGroup group) { experts_group_ = std::move(group); }
  // Sparse layers with expert-bias balancing: the bias [E] (float32) and the tokens routed to
  // each expert since the last update [E] (float32).
  at::Tensor& expert_bias() { return expert_bias_; }
  at::Tensor& tokens_per_expert() { return tokens_per_expert_; }

 private:
  struct Kernels {
    kernels::RmsNormFn attention_norm, q_norm, k_norm, ffn_norm;
    kernels::RopeFn rope;
    kernels::AttentionFn attention;
    kernels::SwigluFn feed_forward;
    kernels::MoeRouterFn router;
    kernels::MoeExpertsFn experts;
    kernels::MoeDispatchFn dispatch;
    kernels::MoeCombineFn combine;
  };
  // The routed experts of a sparse layer on tokens x [N, H]: all experts here, or this rank's
  // experts after moe_dispatch under expert parallelism.
  at::Tensor routed_experts(const at::Tensor& x, const kernels::Routing& routing) const;
  // The dense MLP: the swiglu op, or three projections and silu when LoRA touches them.
  at::Tensor feed_forward(const at::Tensor& x) const;
  // Every projection by its name in the block ("self_attn.q_proj", "mlp.gate_proj", ...).
  std::vector<std::pair<std::string, Linear*>> projections();
  std::vector<std::pair<std::string, const Linear*>> projections() const;
  Linear* linear_named(const std::string& name);

  // The block's computation: {hidden} for dense layers, {hidden, router logits, counts} for
  // sparse ones. With `keys` set, the new tokens follow the cache's (decoding).
  Tensors compute(const at::Tensor& h, const RopeTables& rope, const at::Tensor& document_ids,
                  at::Tensor* keys, at::Tensor* values) const;
  at::Tensor norm(kernels::RmsNormFn fn, const at::Tensor& x, const at::Tensor& weight) const;
  at::Tensor attention(const at::Tensor& x, const RopeTables& rope, const at::Tensor& document_ids,
                       at::Tensor* keys, at::Tensor* values) const;

  std::string prefix_;  // "model.layers.N."
  bool sparse_ = false;
  int64_t head_dim_ = 0, top_k_ = 0, num_experts_ = 0;
  bool norm_topk_prob_ = false;
  double eps_ = 1e-6;
  Kernels kernels_{};
  TensorParallelHooks tp_;
  kernels::ExpertGroup experts_group_;

  Linear q_proj_, k_proj_, v_proj_, o_proj_;
  at::Tensor q_norm_, k_norm_;
  Linear gate_proj_, up_proj_, down_proj_;              // dense MLP
  at::Tensor experts_gate_up_, experts_down_, router_;  // routed experts
  std::optional<ExpertsAdapter> gate_up_adapter_, down_adapter_;
  at::Tensor input_norm_, post_norm_;
  at::Tensor expert_bias_, tokens_per_expert_;  // buffers (expert-bias balancing only)
};

}  // namespace titan::models
