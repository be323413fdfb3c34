// The native Qwen3 / Qwen3-MoE model in ATen ops with autograd (QWEN3_SPEC.md sections 2 and
// 4). Parameters live in `param_dtype` (float32 master weights by default) and are cast to
// the compute dtype where they are used, so gradients reach the master copies.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "titan/models/common/rope.h"
#include "titan/models/model_spec.h"
#include "titan/models/qwen3/qwen3_args.h"

namespace titan::models {

// How routed experts are kept balanced during training.
enum class MoeBalancing { kNone, kAuxLoss, kExpertBias };
MoeBalancing parse_moe_balancing(const std::string& name);  // throws naming the value

struct Qwen3Options {
  MoeBalancing balancing = MoeBalancing::kNone;
  double router_aux_loss_coef = 0.001;
  double expert_bias_update_rate = 0.001;
};

class Qwen3Model : public Model {
 public:
  Qwen3Model(const Qwen3Args& args, const Qwen3Options& options, const BuildOptions& build);

  at::Tensor forward(const at::Tensor& input_ids) override;
  at::Tensor final_hidden(const at::Tensor& input_ids) override;
  at::Tensor output_weight() override;
  at::Tensor forward_cached(const at::Tensor& input_ids, KVCache& cache) override;
  at::Tensor extra_loss() override { return extra_loss_; }
  void after_optimizer_step() override;
  NamedTensors named_parameters() override;
  NamedTensors named_buffers() override;
  NamedTensors moe_load_counts() override;
  nlohmann::json hf_config(const std::string& dtype) const override;
  void to(at::Device device, at::ScalarType param_dtype) override;
  void set_compute_dtype(at::ScalarType dtype) override { compute_dtype_ = dtype; }
  void set_activation_checkpointing(const std::string& mode) override;

  const Qwen3Args& args() const { return args_; }
  at::ScalarType compute_dtype() const { return compute_dtype_; }

 private:
  struct Layer {
    bool sparse = false;
    at::Tensor q_proj, q_bias, k_proj, k_bias, v_proj, v_bias, o_proj, o_bias;
    at::Tensor q_norm, k_norm;
    at::Tensor gate_proj, up_proj, down_proj;          // dense MLP
    at::Tensor experts_gate_up, experts_down, router;  // routed experts
    at::Tensor input_norm, post_norm;
    at::Tensor expert_bias;  // buffer, kExpertBias only
    at::Tensor load;         // tokens per expert since the last optimizer step
  };

  // Calls f(name, tensor) for every parameter in Hugging Face's named_parameters order.
  void visit_parameters(const std::function<void(const std::string&, at::Tensor&)>& f);
  void visit_buffers(const std::function<void(const std::string&, at::Tensor&)>& f);
  void initialise(uint64_t seed);
  // The decoder stack up to the final norm; with a cache, the new tokens follow its contents.
  at::Tensor hidden_states(const at::Tensor& input_ids, KVCache* cache);
  at::Tensor attention(const Layer& layer, const at::Tensor& x, const RopeTables& rope,
                       KVCache* cache, size_t layer_index);
  at::Tensor feed_forward(Layer& layer, const at::Tensor& x,
                          std::vector<at::Tensor>& router_logits);
  const RopeTables& rope_for(int64_t seq_len, at::Device device);

  Qwen3Args args_;
  Qwen3Options options_;
  at::ScalarType compute_dtype_;
  at::Tensor embed_tokens, final_norm, lm_head;  // lm_head undefined when tied
  std::vector<Layer> layers_;
  RopeFrequencies rope_freqs_;
  std::map<std::tuple<int64_t, int, int, int>, RopeTables> rope_cache_;
  at::Tensor extra_loss_;
  int64_t checkpoint_every_ = 0;  // recompute every n-th layer in backward; 0 = never
};

}  // namespace titan::models
