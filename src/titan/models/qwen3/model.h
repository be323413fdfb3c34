// The native Qwen3 / Qwen3-MoE model in ATen ops with autograd (docs/qwen3.md): embedding ->
// blocks (block.h) -> final norm, with the head applied by the loss. Parameters live in the
// parameter dtype (float32 master weights by default) and are cast to the compute dtype where
// they are used, so gradients reach the master copies.
//
// Module paths, for override globs and wrappers: tok_embeddings, layers.N (block.h lists the
// call sites inside a block), norm (the final norm's rms_norm call site; its unit also owns
// lm_head when untied); the loss resolves cross_entropy at "output".
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "titan/kernels/ops.h"
#include "titan/models/common/rope.h"
#include "titan/models/generation.h"
#include "titan/models/model_spec.h"
#include "titan/models/qwen3/block.h"
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

// The token embedding: ids -> hidden states in the compute dtype.
class Qwen3Embedding : public Module {
 public:
  Qwen3Embedding(const at::Tensor& weight, std::optional<int64_t> pad_token_id)
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

// The final norm, and the output projection when it is not tied to the embedding.
class Qwen3FinalNorm : public Module {
 public:
  Qwen3FinalNorm(const at::Tensor& norm, const at::Tensor& lm_head, double eps,
                 kernels::RmsNormFn fn)
      : Module("norm"), norm_(norm), lm_head_(lm_head), eps_(eps), fn_(fn) {}
  at::Tensor forward(const at::Tensor& h);  // through the wrappers
  at::Tensor compute(const at::Tensor& h) const { return fn_(h, norm_, eps_); }  // without
  void visit_parameters(const ParameterVisitor& visit) override;
  at::Tensor& lm_head() { return lm_head_; }  // undefined when tied

 private:
  at::Tensor norm_, lm_head_;
  double eps_;
  kernels::RmsNormFn fn_;
};

class Qwen3Model : public Model, public IncrementalDecoder, public LoraHost {
 public:
  Qwen3Model(const Qwen3Args& args, const Qwen3Options& options, const BuildOptions& build);

  ModelOutput forward(const at::Tensor& input_ids) override;
  ModelOutput forward_packed(const at::Tensor& input_ids,
                             const PackedDocuments& documents) override;
  at::Tensor output_weight() override;
  NamedTensors named_parameters() override;
  NamedTensors named_buffers() override;
  nlohmann::json hf_config(const std::string& dtype) const override;
  std::vector<Module*> modules() override;
  std::vector<Module*> blocks() override;
  IncrementalDecoder* decoder() override { return this; }
  LoraHost* lora_host() override { return this; }
  std::vector<Weight> adaptable_weights() override;
  void add_adapters(const std::vector<std::string>& weight_names, const LoraOptions& options,
                    const at::TensorOptions& tensor_options) override;
  int64_t quantize_frozen_linears(bool double_quantization) override;
  bool quantizable(const std::string& name) override;
  int64_t quantize_weight(const std::string& name, bool double_quantization) override;
  std::vector<std::pair<std::string, std::vector<int64_t>>> nf4_weights() override;
  at::Tensor dequantized_weight(const std::string& name) override;
  void initialise_parameter(const std::string& name, at::Tensor& value,
                            at::Generator& generator) override;
  at::Tensor forward_cached(const at::Tensor& input_ids, KVCache& cache) override;

  // Tensor parallelism: the embedding and blocks get their hooks (parallelize.cpp).
  Qwen3Embedding& embedding() { return *embedding_; }
  Qwen3FinalNorm& final_norm() { return *final_norm_; }

  const Qwen3Args& args() const { return args_; }
  const Qwen3Options& options() const { return options_; }
  at::ScalarType compute_dtype() const { return compute_dtype_; }
  std::vector<Qwen3Block*> qwen3_blocks();

 private:
  void initialise(uint64_t seed);
  // The block that holds native parameter `name` ("model.layers.N...."), or nullptr.
  Qwen3Block* block_of(const std::string& name);
  const RopeTables& rope_for(int64_t seq_len, at::Device device);
  ModelOutput run(const at::Tensor& ids, const RopeTables& rope, const at::Tensor& document_ids);

  Qwen3Args args_;
  Qwen3Options options_;
  at::ScalarType compute_dtype_;
  std::unique_ptr<Qwen3Embedding> embedding_;
  std::vector<std::unique_ptr<Qwen3Block>> blocks_;
  std::unique_ptr<Qwen3FinalNorm> final_norm_;
  RopeFrequencies rope_freqs_;
  std::map<std::tuple<int64_t, int, int, int>, RopeTables> rope_cache_;
};

}  // namespace titan::models
