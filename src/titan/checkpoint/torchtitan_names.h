// torchtitan 0.3.0's names and layouts of the decoder's tensors (its Qwen3StateDictAdapter and
// Llama3StateDictAdapter tell the names) against titan's, which are Hugging Face's:
//   tok_embeddings.weight                     model.embed_tokens.weight
//   layers.L.attention.qkv_linear.wq/wk/wv    model.layers.L.self_attn.q_proj/k_proj/v_proj
//   layers.L.attention.wo / q_norm / k_norm   ...self_attn.o_proj / q_norm / k_norm
//   layers.L.attention_norm / ffn_norm        ...input_layernorm / post_attention_layernorm
//   layers.L.feed_forward.w1 / w3 / w2        ...mlp.gate_proj / up_proj / down_proj
//   layers.L.moe.router.gate.weight           ...mlp.gate.weight
//   layers.L.moe.routed_experts.inner_experts.w1_EFD + w3_EFD   ...mlp.experts.gate_up_proj
//                                                               (joined on dim 1)
//   layers.L.moe.routed_experts.inner_experts.w2_EDF            ...mlp.experts.down_proj
//   layers.L.moe.expert_bias_E                ...mlp.expert_bias
//   norm.weight, lm_head.weight               model.norm.weight, lm_head.weight
// Two layouts differ besides the names:
//   - torchtitan's optimizer holds one fused parameter per layer, qkv_linear.wqkv, whose rows
//     interleave the projections per key/value head: [q of its heads, k, v] for each kv head
//     (its FusedQKVLinear; the model's state dict splits it into wq/wk/wv);
//   - Llama 3's q and k rows pair the rotary dimensions (0,1), (2,3), ... within each head
//     (torchtitan's complex RoPE), where Hugging Face's (and titan's) take (i, i + head_dim/2):
//     the Llama3 adapter's _permute/_reverse_permute. Qwen3 uses the half split in both.
#pragma once

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "titan/common/named_tensors.h"

namespace titan::checkpoint {

// What the mapping needs to know of the model, read from its Hugging Face config.
struct TorchtitanModel {
  bool llama = false;  // Llama 3: q/k rows in torchtitan's pair order
  int64_t n_heads = 0, n_kv_heads = 0, head_dim = 0;

  static TorchtitanModel from_hf_config(const nlohmann::json& hf_config);
};

// How one titan tensor is made of torchtitan's: the named tensors joined on `join_dim`, or a
// slice of the fused wqkv (`qkv_part` 0 q, 1 k, 2 v).
struct TorchtitanSource {
  std::vector<std::string> names;
  int64_t join_dim = 0;
  int qkv_part = -1;
  int64_t permute_heads = 0;  // Llama 3's q/k: rows re-paired per head, for this many heads
};

// The torchtitan model state-dict entries of a titan tensor; nullopt for a name torchtitan's
// decoders do not have.
std::optional<TorchtitanSource> torchtitan_model_source(const std::string& titan_name,
                                                        const TorchtitanModel& model);
// The same for a parameter's optimizer state: q/k/v come from the fused wqkv when `fused_qkv`.
std::optional<TorchtitanSource> torchtitan_param_source(const std::string& titan_name,
                                                        const TorchtitanModel& model,
                                                        bool fused_qkv);

// titan's tensor from the tensors `source` names, read by `read` (in that order).
at::Tensor from_torchtitan(const TorchtitanSource& source, const std::vector<at::Tensor>& parts,
                           const TorchtitanModel& model);

// titan's model tensors as torchtitan's state dict names and lays them out (the tied lm_head
// as a copy of the embedding when `tied`, since torchtitan's tied models save both).
NamedTensors to_torchtitan_model(const NamedTensors& titan, const TorchtitanModel& model,
                                 bool tied);
// Per-parameter tensors (an optimizer moment of each parameter, in its parameter's layout) as
// torchtitan's optimizer names them: the fused wqkv for q/k/v.
NamedTensors to_torchtitan_params(const NamedTensors& titan, const TorchtitanModel& model);

// The torchtitan parameters a titan parameter's optimizer state goes to: the fused wqkv for
// q/k/v, both w1_EFD and w3_EFD for an expert stack's gate_up_proj.
std::vector<std::string> torchtitan_param_names(const std::string& titan_name,
                                                const TorchtitanModel& model);

// Whether a torchtitan model entry is a buffer (an expert bias), which no optimizer state has
// and no export dtype applies to.
bool is_torchtitan_buffer(const std::string& torchtitan_name);

}  // namespace titan::checkpoint
