// Grouped-query attention of a decoder layer (docs/architecture.md, "The model room"): q/k/v
// projections, optional per-head RMSNorms of q and k (Qwen3), rotary embedding of any supported
// type (the tables come from the decoder, per token), the attention op, the output projection.
//
// Call sites (override.imports globs see these paths; PATH is the layer's, "layers.N"):
//   PATH.attention          rope, attention, context_attention
//   PATH.attention.q_norm   rms_norm       PATH.attention.k_norm   rms_norm
//   PATH.attention.{q,k,v,o}_proj          nf4_linear (a projection held in NF4 under QLoRA)
//
// Tensor parallelism: q/k/v are column-parallel (this rank's heads), o_proj row-parallel; the
// hooks run at the region's edges. Decoding passes a layer's KV cache, extended in place.
// Context parallelism attends through a hook set here (models/parallel_context.h: the keys and
// values of the whole sequence gathered over the cp ranks), with this layer's context_attention
// op (call site PATH.attention); unset, the rank holds the whole sequence.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "titan/kernels/ops.h"
#include "titan/models/common/linear.h"
#include "titan/models/common/rms_norm.h"
#include "titan/models/common/rope.h"
#include "titan/models/parallel_context.h"

namespace titan::kernels {
class OverrideResolver;
}

namespace titan::models {

struct AttentionConfig {
  int64_t hidden_size = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  bool bias = false;     // q/k/v/o biases (attention_bias)
  bool qk_norm = false;  // per-head RMSNorm of q and k before the rotation (Qwen3)
  double norm_eps = 1e-6;
};

class Attention {
 public:
  // Parameters allocated (uninitialised) with `options`; kernels resolved for `path`.
  Attention(const AttentionConfig& config, const std::string& path,
            const at::TensorOptions& options, kernels::OverrideResolver& overrides);

  // x [B, S, H] (normed) -> [B, S, H]. `rope` holds cos/sin [S, d] or [B, 1, S, d] (each row's
  // own positions); `positions`/`document_ids` [B, S] as the decoder received them (the latter
  // undefined for plain causal rows). With `keys` set (decoding), the new tokens follow the
  // cache's, which is extended.
  at::Tensor forward(const at::Tensor& x, const RopeTables& rope, const at::Tensor& positions,
                     const at::Tensor& document_ids, at::Tensor* keys = nullptr,
                     at::Tensor* values = nullptr) const;

  // Parameters under `prefix` ("model.layers.N.self_attn."), Hugging Face's names.
  void visit_parameters(const std::string& prefix, const ParameterVisitor& visit);
  // The projections by their name in the layer ("self_attn.q_proj", ...).
  std::vector<std::pair<std::string, Linear*>> projections();

  void set_tensor_parallel(TensorParallelHooks hooks) { tp_ = std::move(hooks); }
  void set_context_parallel(ContextParallelAttention attend) { cp_ = std::move(attend); }
  const AttentionConfig& config() const { return config_; }

 private:
  AttentionConfig config_;
  Linear q_proj_, k_proj_, v_proj_, o_proj_;
  RmsNorm q_norm_, k_norm_;  // weights undefined without qk_norm
  kernels::RopeFn rope_ = nullptr;
  kernels::AttentionFn attention_ = nullptr;
  kernels::ContextAttentionFn context_attention_ = nullptr;
  TensorParallelHooks tp_;
  ContextParallelAttention cp_;
};

}  // namespace titan::models
