// Model: what every model backend provides to the trainer, the loss, the checkpoint code and
// the CLI (native Qwen3 today; the Transformers backend beside it). Everything else a model
// may offer is an optional interface (generation.h) or lives in its ModelSpec (model_spec.h).
#pragma once

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

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

class Model {
 public:
  virtual ~Model() = default;

  // The forward up to the head, for input ids [B, S] (int64). The head itself is applied by
  // the loss (chunked linear + cross-entropy) or by logits() below.
  virtual ModelOutput forward(const at::Tensor& input_ids) = 0;
  // The same for rows of packed documents. Models without block-causal attention refuse.
  virtual ModelOutput forward_packed(const at::Tensor& input_ids, const PackedDocuments& documents);
  // The output projection [V, H] as the forward sees it now (for tied models the embedding);
  // read it at each use, since a wrapper may have swapped the tensor in its slot.
  virtual at::Tensor output_weight() = 0;

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

  // Every wrappable unit in forward order (embedding, blocks, final norm/head), and the
  // repeated blocks alone (what activation checkpointing and FSDP wrap). Empty when the model
  // has no such structure.
  virtual std::vector<Module*> modules() { return {}; }
  virtual std::vector<Module*> blocks() { return {}; }

  // Incremental decoding with a KV cache, when the model supports it.
  virtual IncrementalDecoder* decoder() { return nullptr; }
  // LoRA adapters and NF4 base weights, when the model supports them.
  virtual LoraHost* lora_host() { return nullptr; }
};

// Logits [B, S, V] in the compute dtype: forward(ids).hidden times output_weight().
at::Tensor logits(Model& model, const at::Tensor& input_ids);

// Moves and casts every parameter (and moves every buffer) in place: the tensor objects stay
// the same (set_data), so an optimizer or wrapper holding them sees the moved values.
void move_model(Model& model, at::Device device, at::ScalarType param_dtype);

}  // namespace titan::models
