// Model: what every model backend provides to the trainer, the loss, the checkpoint code and
// the CLI (the native decoder families, common/decoder.h, and the Transformers backend).
// ModelTensors is the part of it that checkpoints, exports, the optimizer and LoRA need (the
// trainer's model parts are one, train/model_parts.h); everything else a model may offer is an
// optional interface (generation.h, StageForward and LoraHost below) or lives in its ModelSpec
// (model_spec.h).
#pragma once

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

#include "titan/common/named_tensors.h"
#include "titan/models/common/lora.h"
#include "titan/models/module.h"
#include "titan/models/parallel_context.h"

namespace titan::models {

class IncrementalDecoder;

// What a model lets LoRA do to it (lora/lora_model.h applies the config through it; docs/lora.md).
class LoraHost {
 public:
  virtual ~LoraHost() = default;
  struct Weight {
    std::string name;      // native parameter name of the base weight
    std::string module;    // Hugging Face path of its module (what target_modules globs match)
    bool experts = false;  // an expert stack [E, out, in] rather than a linear [out, in]
  };
  virtual std::vector<Weight> adaptable_weights() = 0;
  // Adds an adapter (lora_A / lora_B parameters, common/lora.h) to each named weight, made
  // with `tensor_options` (the parameters' dtype and device; the base weight itself may still
  // be on the meta device); their values are set by the caller.
  virtual void add_adapters(const std::vector<std::string>& weight_names,
                            const LoraOptions& options,
                            const at::TensorOptions& tensor_options) = 0;
  // QLoRA: holds every frozen (requires_grad false) adaptable linear weight in NF4 from now
  // on, no longer a parameter. Returns the bytes they take. Throws where the model cannot.
  virtual int64_t quantize_frozen_linears(bool double_quantization) = 0;
  // QLoRA, one weight: whether `name` is a linear weight QLoRA holds in NF4, and holding that
  // weight (frozen, with its value) in NF4 from now on; returns its bytes. A model materialized
  // weight by weight (models/materialize.h) quantises each as it arrives, so that the base is
  // never whole in full precision.
  virtual bool quantizable(const std::string& name) = 0;
  virtual int64_t quantize_weight(const std::string& name, bool double_quantization) = 0;
  // The NF4-held weights by native name, with their [out, in] shapes (no data is read).
  virtual std::vector<std::pair<std::string, std::vector<int64_t>>> nf4_weights() = 0;
  // One NF4-held weight dequantised to float32 (exports dequantise one at a time).
  virtual at::Tensor dequantized_weight(const std::string& name) = 0;
};

// Where the documents of rows packed from several documents lie (training.document_masking):
// int64 [B, S] each token's position in its document (restarting at 0 where a document starts)
// and the index of its document in the row. A model given them attends block-causally (each
// document to itself only) and rotates by these positions.
// Under context parallelism the rows are a rank's part of longer rows (its tokens, not
// contiguous): positions are then defined for causal rows too (each token's place in its row),
// and lie below positions_end (the whole rows' length; 0: this batch's length).
struct PackedDocuments {
  at::Tensor positions;
  at::Tensor document_ids;
  int64_t positions_end = 0;
};

struct ModelOutput {
  at::Tensor hidden;      // [B, S, H] final (normed) hidden states, in the compute dtype
  at::Tensor extra_loss;  // auxiliary loss terms, already scaled (MoE aux loss); may be undefined
};

// The input of the forward of a pipeline stage (or of the whole model).
struct StageInput {
  at::Tensor tokens;  // [B, S] int64, for a stage with the embedding
  at::Tensor hidden;  // [B, S, H], the previous stage's output, for any other
  // [B, S] int64 each token's position (RoPE); undefined: 0..S-1 in every row. Positions are
  // below `positions_end` (0: S).
  at::Tensor positions;
  int64_t positions_end = 0;
  // The rows' length, when `hidden` holds a part of it (sequence parallelism splits the
  // sequence over tp between the blocks); 0: the input's own.
  int64_t sequence_length = 0;
  // [B, S] int64 each token's document (block-causal attention); undefined: causal rows.
  at::Tensor document_ids;
};

struct StageOutput {
  // The last stage's final-norm output, or the last held block's output for the next stage.
  at::Tensor hidden;
  // Fixed-shape float32 tensors (StageForward::carried_shapes) that travel forward with the
  // activations, added up stage after stage: this stage's share (today the per-expert routing
  // selections of the MoE auxiliary loss). Their sums over every stage travel back with the
  // gradients. The pipeline passes them along without knowing what they are.
  std::vector<at::Tensor> carried;
  // This stage's part of the auxiliary loss, already scaled as ModelOutput::extra_loss is, given
  // the sums of `carried` over every stage; the parts of all stages add up to the whole model's
  // auxiliary loss and its gradient. Unset, or an undefined result: no auxiliary loss here.
  std::function<at::Tensor(const std::vector<at::Tensor>& totals)> auxiliary;
};

// The forward of a pipeline stage (a model cut by ModelSpec::pipeline, or the whole model): what
// pipeline parallelism runs, knowing nothing else of the model.
class StageForward {
 public:
  virtual ~StageForward() = default;
  // The parts this model holds: the embedding when it holds it, else `input.hidden`; its
  // blocks; the final norm when it holds the head.
  virtual StageOutput forward_stage(const StageInput& input) = 0;
  // The shapes of StageOutput::carried, the same on every stage of the model.
  virtual std::vector<std::vector<int64_t>> carried_shapes() const { return {}; }
};

// The numbers of a model's architecture that code outside the model reads: the pipeline (the
// activations' shape, the tied embedding) and the memory estimate.
struct ModelShape {
  int64_t layers = 0;       // blocks of the whole model
  int64_t layers_held = 0;  // blocks this model holds (a pipeline stage's own; else all)
  int64_t hidden_size = 0;
  bool tied_embeddings = false;
  std::string embedding_name;  // the input embedding's parameter (the tied head's too)
  int64_t heads = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  // The width of the feed-forward a token passes through (routed experts: top-k x an expert's).
  int64_t intermediate_size = 0;
};

// What checkpoints, exports, the optimizer, LoRA and the initialisation need of a model: its
// tensors by name, how to initialise one, its Hugging Face config. A model is one; so are the
// parts of a model a training rank holds (train/model_parts.h).
class ModelTensors {
 public:
  virtual ~ModelTensors() = default;

  // Parameters in native names (Hugging Face v5 in-memory names), in the model's order; a tied
  // head appears once, as its embedding.
  virtual NamedTensors named_parameters() = 0;
  // Non-trainable state that belongs in a training checkpoint (e.g. expert biases).
  virtual NamedTensors named_buffers() { return {}; }
  // The model's initialisation of one parameter (Hugging Face's _init_weights), in place on
  // `value` (float32, on the CPU, the parameter's shape), drawing from `generator`. Applied to
  // every parameter in the model's order with one generator, it gives the model's seeded init
  // (models/materialize.h streams it so). Models that are never initialised by titan refuse.
  virtual void initialise_parameter(const std::string& name, at::Tensor& value,
                                    at::Generator& generator);
  // Every parameter in the order the seeded initialisation draws them: named_parameters(),
  // unless the model is a pipeline stage, which still draws the whole model's values in order
  // (its own come out as in one process) and keeps its own.
  virtual NamedTensors initialisation_order() { return named_parameters(); }
  // Hugging Face config.json for this model, with weights recorded as `dtype`.
  virtual nlohmann::json hf_config(const std::string& dtype) const = 0;
  // LoRA adapters and NF4 base weights, when the model supports them.
  virtual LoraHost* lora_host() { return nullptr; }
};

class Model : public ModelTensors {
 public:
  // The forward up to the head, for input ids [B, S] (int64). The head itself is applied by
  // the loss (chunked linear + cross-entropy) or by logits() below.
  virtual ModelOutput forward(const at::Tensor& input_ids) = 0;
  // The same for rows of packed documents. Models without block-causal attention refuse.
  virtual ModelOutput forward_packed(const at::Tensor& input_ids, const PackedDocuments& documents);
  // The output projection [V, H] as the forward sees it now (for tied models the embedding);
  // read it at each use, since a wrapper may have swapped the tensor in its slot.
  virtual at::Tensor output_weight() = 0;

  // Every wrappable unit in forward order (embedding, blocks, final norm/head), and the
  // repeated blocks alone (what activation checkpointing and FSDP wrap). Empty when the model
  // has no such structure.
  virtual std::vector<Module*> modules() { return {}; }
  virtual std::vector<Module*> blocks() { return {}; }

  // The numbers of its architecture (zeros where the model cannot tell).
  virtual ModelShape shape() const { return {}; }
  // Incremental decoding with a KV cache, when the model supports it.
  virtual IncrementalDecoder* incremental_decoder() { return nullptr; }
  // The stage forward pipeline parallelism runs, when the model can be a pipeline stage.
  virtual StageForward* stage_forward() { return nullptr; }
};

// Logits [B, S, V] in the compute dtype: forward(ids).hidden times output_weight().
at::Tensor logits(Model& model, const at::Tensor& input_ids);

// Moves and casts every parameter (and moves every buffer) in place: the tensor objects stay
// the same (set_data), so an optimizer or wrapper holding them sees the moved values.
void move_model(Model& model, at::Device device, at::ScalarType param_dtype);

}  // namespace titan::models
