// Decoder: the model every decoder-only family is (torchtitan's models/common/decoder.py):
// token embedding -> blocks -> final norm, the head applied by the loss. A family (qwen3/,
// llama3/) only describes its numbers in a DecoderConfig, picks the parts of its blocks, and
// writes its Hugging Face config; everything else lives here once: the blocks (attention,
// feed-forward or routed experts), the stage forward pipeline parallelism runs, the KV-cache
// path of generation, and the LoRA host (adapters and NF4 on the projections). Parallelism is
// applied from outside, through decoder_plan.h.
//
// Module paths, for override globs and wrappers: tok_embeddings, layers.N (a block; attention.h,
// feed_forward.h and moe_layer.h list the call sites inside it), norm (the final norm's rms_norm
// call site; its unit also owns lm_head when untied); the loss resolves cross_entropy at
// "output". Parameters keep Hugging Face's names (model.layers.N.self_attn.q_proj.weight, ...).
//
// Parameters live in the parameter dtype (float32 master weights by default) and are cast to
// the compute dtype where they are used, so gradients reach the master copies.
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "titan/models/common/attention.h"
#include "titan/models/common/feed_forward.h"
#include "titan/models/common/moe.h"
#include "titan/models/common/moe_layer.h"
#include "titan/models/common/rms_norm.h"
#include "titan/models/common/rope.h"
#include "titan/models/generation.h"
#include "titan/models/model_spec.h"
#include "titan/models/stage_parts.h"

namespace titan::models {

// How routed experts are kept balanced during training.
enum class MoeBalancing { kNone, kAuxLoss, kExpertBias };
MoeBalancing parse_moe_balancing(const std::string& name);  // throws naming the value

struct BalancingOptions {
  MoeBalancing balancing = MoeBalancing::kNone;
  double router_aux_loss_coef = 0.001;
  double expert_bias_update_rate = 0.001;
};

// Every number of a decoder, as its family fills it in.
struct DecoderConfig {
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  AttentionConfig attention;
  int64_t intermediate_size = 0;  // the dense layers' feed-forward
  MoeConfig moe;                  // num_experts 0: no layer routes to experts
  std::vector<bool> sparse;       // per layer: routed experts (else the feed-forward)
  double norm_eps = 1e-6;
  RopeSettings rope;
  bool tie_word_embeddings = false;
  std::optional<int64_t> pad_token_id;
  double initializer_range = 0.02;
  BalancingOptions balancing;
};

// The token embedding: ids -> hidden states in the compute dtype.
class Embedding : public Module {
 public:
  Embedding(const at::Tensor& weight, std::optional<int64_t> pad_token_id)
      : Module("tok_embeddings"), weight_(weight), pad_(pad_token_id.value_or(-1)) {}
  at::Tensor forward(const at::Tensor& ids, at::ScalarType compute_dtype);  // through the wrappers
  at::Tensor compute(const at::Tensor& ids, at::ScalarType compute_dtype) const;  // without
  void visit_parameters(const ParameterVisitor& visit) override;
  at::Tensor& weight() { return weight_; }
  // Vocabulary parallelism: the slot holds rows [begin, begin + real) of the table; each rank
  // looks up the ids it holds (zeros for the others) and `combine` sums the ranks' rows (the
  // tensor-parallel exit: an all-reduce, or a reduce-scatter over the sequence).
  void set_vocab_parallel(int64_t begin, int64_t real, TensorParallelHooks::Fn combine);

 private:
  at::Tensor weight_;
  int64_t pad_;
  int64_t vocab_begin_ = 0, vocab_real_ = -1;  // -1: the whole table
  TensorParallelHooks::Fn combine_;
};

// One decoder layer: pre-norm attention, then a pre-norm feed-forward or routed experts, each
// added to the residual. A Module at path "layers.N".
class TransformerBlock : public Module {
 public:
  struct Output {
    at::Tensor hidden;         // [B, S, H]
    at::Tensor router_logits;  // sparse layers: [B*S (this rank's share), E], for the aux loss
    at::Tensor expert_counts;  // sparse layers: [E] int64 tokens routed to each expert
  };

  TransformerBlock(const DecoderConfig& config, int64_t index, const at::TensorOptions& options,
                   const at::TensorOptions& buffer_options, kernels::OverrideResolver& overrides);

  // Training / evaluation forward (through the wrappers); see Attention::forward.
  Output forward(const at::Tensor& h, const RopeTables& rope, const at::Tensor& positions,
                 const at::Tensor& document_ids);
  // Decoding: no wrappers, no autograd; `keys`/`values` this layer's cache, extended.
  at::Tensor forward_cached(const at::Tensor& h, const RopeTables& rope, at::Tensor& keys,
                            at::Tensor& values);

  void visit_parameters(const ParameterVisitor& visit) override;
  void visit_buffers(const ParameterVisitor& visit) override;

  const std::string& prefix() const { return prefix_; }  // "model.layers.N."
  bool sparse() const { return moe_.has_value(); }
  Attention& attention() { return attention_; }
  FeedForward* feed_forward() { return feed_forward_ ? &*feed_forward_ : nullptr; }
  MoeLayer* moe() { return moe_ ? &*moe_ : nullptr; }
  // The linear projections by their name in the layer ("self_attn.q_proj", "mlp.up_proj").
  std::vector<std::pair<std::string, Linear*>> projections();
  // The hooks of tensor parallelism, for every part of the layer.
  void set_tensor_parallel(const TensorParallelHooks& hooks);

 private:
  // {hidden} for dense layers, {hidden, router logits, counts} for sparse ones.
  Tensors compute(const at::Tensor& h, const RopeTables& rope, const at::Tensor& positions,
                  const at::Tensor& document_ids, at::Tensor* keys, at::Tensor* values) const;

  // In the order the layer's call sites are resolved (the override log lists them so):
  // attention_norm, the attention's, ffn_norm, the feed-forward's or the experts'.
  std::string prefix_;
  RmsNorm attention_norm_;
  Attention attention_;
  RmsNorm ffn_norm_;
  std::optional<FeedForward> feed_forward_;
  std::optional<MoeLayer> moe_;
  TensorParallelHooks tp_;
};

// The final norm, and the output projection when it is not tied to the embedding.
class FinalNorm : public Module {
 public:
  FinalNorm(const at::Tensor& norm, const at::Tensor& lm_head, double eps, kernels::RmsNormFn fn)
      : Module("norm"), norm_{norm, eps, fn}, lm_head_(lm_head) {}
  at::Tensor forward(const at::Tensor& h);  // through the wrappers
  at::Tensor compute(const at::Tensor& h) const { return norm_.fn(h, norm_.weight, norm_.eps); }
  void visit_parameters(const ParameterVisitor& visit) override;
  at::Tensor& lm_head() { return lm_head_; }  // undefined when tied

 private:
  RmsNorm norm_;
  at::Tensor lm_head_;
};

class Decoder : public Model, public IncrementalDecoder, public LoraHost, public StageForward {
 public:
  Decoder(const DecoderConfig& config, const BuildOptions& build);

  // Model
  ModelOutput forward(const at::Tensor& input_ids) override;
  ModelOutput forward_packed(const at::Tensor& input_ids,
                             const PackedDocuments& documents) override;
  at::Tensor output_weight() override;
  NamedTensors named_parameters() override;
  NamedTensors named_buffers() override;
  std::vector<Module*> modules() override;
  std::vector<Module*> blocks() override;
  ModelShape shape() const override;
  IncrementalDecoder* incremental_decoder() override { return this; }
  StageForward* stage_forward() override { return this; }
  LoraHost* lora_host() override { return this; }
  void initialise_parameter(const std::string& name, at::Tensor& value,
                            at::Generator& generator) override;
  NamedTensors initialisation_order() override;

  // StageForward: the parts this model holds (all of them unless keep_only was called). With
  // the MoE auxiliary loss, `carried` is the stage's routing selections [E] and `auxiliary`
  // its share of Hugging Face's E * sum_e f_e P_e over every layer of the model: the whole
  // model's selections and rows, this stage's probabilities (moe.h).
  StageOutput forward_stage(const StageInput& input) override;
  std::vector<std::vector<int64_t>> carried_shapes() const override;
  // Tokens of each sparse layer's aux loss are split over this many ranks (tensor or context
  // parallelism route different tokens): their gradients are averaged over them. Set by
  // parallelize (decoder_plan.h).
  void set_aux_loss_divisor(double divisor) { aux_loss_divisor_ = divisor; }

  // Pipeline parallelism: from now on this model is one stage, holding only `parts` (the
  // others' parameters never get storage, and modules() / named_parameters() leave them out).
  // A last stage of a tied model holds the embedding table too, as its head: the first and
  // last stages each hold the tensor (their gradients are summed, docs/distributed.md).
  void keep_only(const StageParts& parts);
  const StageParts& stage() const { return stage_; }
  // Whether this model holds the embedding table (to look up tokens, or as a tied head).
  bool holds_embedding() const {
    return stage_.embedding || (stage_.head && config_.tie_word_embeddings);
  }

  // IncrementalDecoder
  at::Tensor forward_cached(const at::Tensor& input_ids, KVCache& cache) override;

  // LoraHost
  std::vector<Weight> adaptable_weights() override;
  void add_adapters(const std::vector<std::string>& weight_names, const LoraOptions& options,
                    const at::TensorOptions& tensor_options) override;
  int64_t quantize_frozen_linears(bool double_quantization) override;
  bool quantizable(const std::string& name) override;
  int64_t quantize_weight(const std::string& name, bool double_quantization) override;
  std::vector<std::pair<std::string, std::vector<int64_t>>> nf4_weights() override;
  at::Tensor dequantized_weight(const std::string& name) override;

  // The parts, for the parallelize step and the optimizer hooks.
  Embedding& embedding() { return *embedding_; }
  FinalNorm& final_norm() { return *final_norm_; }
  std::vector<TransformerBlock*> layers();  // the blocks this model holds
  const DecoderConfig& config() const { return config_; }
  at::ScalarType compute_dtype() const { return compute_dtype_; }

 private:
  void initialise(uint64_t seed);
  const RopeTables& rope_for(int64_t length, at::Device device);
  at::Device device();
  // The block holding native parameter `name` ("model.layers.N...."), or nullptr.
  TransformerBlock* block_of(const std::string& name);
  Linear* projection_named(const std::string& weight_name);
  bool holds_layer(int64_t index) const;
  // Whether the model trains with the auxiliary loss (routing selections travel).
  bool routes() const;
  // The scaled auxiliary loss of sums whose selections and rows may be every stage's.
  at::Tensor auxiliary_loss(const LoadBalancingSums& sums) const;

  DecoderConfig config_;
  at::ScalarType compute_dtype_;
  std::unique_ptr<Embedding> embedding_;
  std::vector<std::unique_ptr<TransformerBlock>> blocks_;
  std::unique_ptr<FinalNorm> final_norm_;
  RopeFrequencies rope_freqs_;
  std::map<std::tuple<int64_t, int, int, int>, RopeTables> rope_cache_;
  StageParts stage_;
  double aux_loss_divisor_ = 1.0;
};

// `model` as the decoder it is; throws for another backend's model.
Decoder& as_decoder(Model& model);

}  // namespace titan::models
