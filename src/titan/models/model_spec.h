// ModelSpec: how the trainer, the checkpoint code and the CLI see a model. A model family
// registers one spec (name -> builder, state-dict adapter, FLOPs counter); the trainer never
// names a concrete model class, so other backends plug in beside the native Qwen3.
#pragma once

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "titan/config/trainer_config.h"

namespace titan::models {

// Ordered (name, tensor) pairs; order is the model's parameter order.
using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// Keys and values of the tokens decoded so far, per layer, for incremental decoding.
struct KVCache {
  std::vector<at::Tensor> keys, values;  // [B, n_kv_heads, length, head_dim] per layer
  int64_t length = 0;                    // tokens already in the cache
};

class Model {
 public:
  virtual ~Model() = default;
  // Logits [B, S, V] for input ids [B, S] (int64), in the compute dtype.
  virtual at::Tensor forward(const at::Tensor& input_ids) = 0;
  // The final normed hidden states [B, S, H] and the output projection [V, H], so the loss can
  // fuse lm_head with cross-entropy in chunks instead of materialising all logits.
  virtual at::Tensor final_hidden(const at::Tensor& input_ids) = 0;
  virtual at::Tensor output_weight() = 0;
  // Logits [B, n, V] of `input_ids` [B, n] placed after the cache's tokens; appends their keys
  // and values to the cache (generation). Inference only (no autograd).
  virtual at::Tensor forward_cached(const at::Tensor& input_ids, KVCache& cache) {
    throw std::runtime_error("this model does not support incremental decoding");
  }
  // Extra loss terms of the last forward (MoE auxiliary loss), already scaled; undefined
  // tensor when there are none.
  virtual at::Tensor extra_loss() { return {}; }
  // Called after each optimizer step (aux-loss-free expert bias update).
  virtual void after_optimizer_step() {}
  // Parameters in native names (Hugging Face v5 in-memory names: fused MoE experts
  // mlp.experts.gate_up_proj [E, 2*Im, H] and mlp.experts.down_proj [E, H, Im]). A tied
  // lm_head appears once, as model.embed_tokens.weight.
  virtual NamedTensors named_parameters() = 0;
  // Non-trainable state that still belongs in a training checkpoint (e.g. expert biases).
  virtual NamedTensors named_buffers() { return {}; }
  // Tokens routed to each expert since the last after_optimizer_step() (float32 [E] per MoE
  // layer, expert_bias balancing only). With data parallelism the trainer sums these across
  // ranks (all-reduce in place) before calling after_optimizer_step(), so every rank applies
  // the same bias update.
  virtual NamedTensors moe_load_counts() { return {}; }
  // Hugging Face config.json for this model (QWEN3_SPEC.md section 5.3), weights in `dtype`.
  virtual nlohmann::json hf_config(const std::string& dtype) const = 0;
  // Casts/moves every parameter and buffer.
  virtual void to(at::Device device, at::ScalarType param_dtype) = 0;
  virtual void set_compute_dtype(at::ScalarType dtype) = 0;
  // activation_checkpoint.mode: "none", "selective" (every other layer recomputed in
  // backward) or "full" (every layer).
  virtual void set_activation_checkpointing(const std::string& mode) {}
};

// Converts between Hugging Face checkpoint names/layouts and the native ones.
struct StateDictAdapter {
  // Native -> HF on-disk tensors (per-expert MoE names, tied lm_head omitted).
  std::function<NamedTensors(const NamedTensors& native)> to_hf;
  // HF on-disk key -> native: given every HF key and a way to read a tensor, produce the native
  // tensors. Accepts per-expert and fused MoE layouts and tied checkpoints without
  // lm_head.weight. Missing / unexpected / mis-shaped tensors throw titan::Error naming them.
  std::function<NamedTensors(const std::vector<std::string>& hf_keys,
                             const std::function<at::Tensor(const std::string&)>& read,
                             const NamedTensors& expected_native)>
      from_hf;
};

struct BuildOptions {
  at::Device device = at::kCPU;
  at::ScalarType param_dtype = at::kFloat;    // what the optimizer updates
  at::ScalarType compute_dtype = at::kFloat;  // what forward/backward compute in
  bool init_weights = true;                   // false: parameters left uninitialised (to be loaded)
  uint64_t seed = 0;
};

struct ModelSpec {
  std::string name;
  // Builds a model from the resolved config (model.flavor / model.hf_assets_path ...).
  std::function<std::unique_ptr<Model>(const config::TrainerConfig&, const BuildOptions&)> build;
  // Builds from a Hugging Face config.json (for forward/eval/generate/convert).
  std::function<std::unique_ptr<Model>(const nlohmann::json& hf_config,
                                       const std::string& source_path, const BuildOptions&)>
      build_from_hf_config;
  StateDictAdapter adapter;
  // Training FLOPs per token, torchtitan's convention (QWEN3_SPEC.md section 7).
  std::function<double(const Model&, int64_t seq_len)> flops_per_token;
};

// The registry of model specs (one of the few globals: a registry).
void register_model_spec(ModelSpec spec);
const ModelSpec& get_model_spec(const std::string& name);  // throws naming the known specs
std::vector<std::string> model_spec_names();

}  // namespace titan::models
