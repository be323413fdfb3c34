// A Hugging Face Transformers causal LM as a titan Model: the first training path. The model is
// Transformers' own Python module, run in the embedded interpreter; titan owns its parameters
// (slots the optimizer, activation checkpointing and FSDP use) and pushes them into the Python
// modules just before each unit runs. Units, for the wrappers:
//   layers.N  each decoder layer (its forward is patched to run through the unit's wrappers)
//   tok_embeddings  the input embedding, when it is not tied to the head
//   root      everything else (final norm, head, a tied embedding): the whole decoder forward
// The head is applied by titan's loss (output_weight()), so the [tokens, vocab] logits are
// never materialised.
#pragma once

#include <pybind11/pybind11.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "titan/models/common/linear.h"
#include "titan/models/generation.h"
#include "titan/models/model.h"
#include "titan/models/stage_parts.h"

namespace titan::transformers_backend {

// A Python object owned from C++: released under the GIL wherever its last owner dies (an
// autograd engine thread, a wrapper's copy of a forward).
using PyRef = std::shared_ptr<pybind11::object>;
PyRef hold(pybind11::object object);

class TransformersModel;

// Both classes hold pybind11 objects, which pybind11 declares with hidden visibility: they are
// hidden too (they never leave this library; titan reaches it through its C entry points), so
// that GCC does not warn that a visible class holds hidden fields (-Wattributes).
#define TITAN_PYBIND_HIDDEN __attribute__((visibility("hidden")))

class TITAN_PYBIND_HIDDEN HfUnit : public models::Module {
 public:
  HfUnit(std::string path, TransformersModel& owner, std::vector<size_t> slots);
  void visit_parameters(const models::ParameterVisitor& visit) override;
  // Runs `call` (Python, under the GIL it takes) through the wrappers, with this unit's
  // parameters pushed into the Python modules first. Call without holding the GIL.
  models::Tensors forward(const models::Tensors& inputs,
                          std::function<pybind11::object(const models::Tensors&)> call);
  const std::vector<size_t>& slots() const { return slots_; }
  void add_slot(size_t slot) { slots_.push_back(slot); }

 private:
  TransformersModel& owner_;
  std::vector<size_t> slots_;
};

class TITAN_PYBIND_HIDDEN TransformersModel : public models::Model,
                                              public models::LoraHost,
                                              public models::StageForward,
                                              public models::IncrementalDecoder {
 public:
  // `model` is the built AutoModelForCausalLM; the GIL must be held.
  TransformersModel(pybind11::object model, pybind11::object helper, at::ScalarType compute_dtype);
  ~TransformersModel() override;

  models::ModelOutput forward(const at::Tensor& input_ids) override;
  // Packed documents (document masking): the rows' positions go to Transformers as position_ids,
  // from which it builds the block-causal mask and restarts the rotary positions per document.
  models::ModelOutput forward_packed(const at::Tensor& input_ids,
                                     const models::PackedDocuments& documents) override;
  at::Tensor output_weight() override;
  NamedTensors named_parameters() override;
  // Every parameter of the whole model, those another pipeline stage holds as shapes (the
  // pipeline's export gathers them in this order).
  NamedTensors initialisation_order() override;
  nlohmann::json hf_config(const std::string& dtype) const override;
  // From config.json's usual keys (hidden_size, num_hidden_layers, ...; MoE's when present).
  models::ModelShape shape() const override;
  std::vector<models::Module*> modules() override;
  std::vector<models::Module*> blocks() override;

  // LoRA through PEFT itself (inject_adapter_in_model), on nn.Linear modules; titan owns the
  // adapters' parameters as it owns the others. Expert stacks are refused. QLoRA: a frozen
  // nn.Linear's weight becomes NF4, no longer a slot, and its module's forward calls titan's
  // nf4_linear kernel (the default implementation for the device).
  models::LoraHost* lora_host() override { return this; }
  std::vector<Weight> adaptable_weights() override;
  void add_adapters(const std::vector<std::string>& weight_names,
                    const models::LoraOptions& options,
                    const at::TensorOptions& tensor_options) override;
  int64_t quantize_frozen_linears(bool double_quantization) override;
  // Built with its weights, so quantised whole (quantize_frozen_linears), never weight by
  // weight.
  bool quantizable(const std::string&) override { return false; }
  int64_t quantize_weight(const std::string& name, bool double_quantization) override;
  std::vector<std::pair<std::string, std::vector<int64_t>>> nf4_weights() override;
  at::Tensor dequantized_weight(const std::string& name) override;

  // Pipeline parallelism (stages.py): from now on this model is one stage, holding layers
  // [first_layer, end_layer), the embedding on the first stage and the final norm and head on
  // the last (a tied table on both); the other parameters are let go. Throws naming the family
  // when its decoder is not a plain sequence of layers.
  void keep_only(const models::StageParts& parts);
  models::StageForward* stage_forward() override { return this; }
  models::StageOutput forward_stage(const models::StageInput& input) override;
  // The data-parallel units this model holds: the untied input embedding (or nullptr) and the
  // root (the final norm, the head, a tied table; nullptr when it holds none of them).
  models::Module* embedding_unit();
  models::Module* head_unit();

  // titan generate (generation.py): the model's own forward with Transformers' own KV cache
  // (a DynamicCache held here; a cache of length 0 starts a new one), as its generate() runs.
  models::IncrementalDecoder* incremental_decoder() override { return this; }
  at::Tensor forward_cached(const at::Tensor& input_ids, models::KVCache& cache) override;

  // Context parallelism (context_parallel.h): document ids go to the attention function as the
  // decoder forward's titan_document_ids keyword.
  void pass_document_ids() { pass_document_ids_ = true; }
  bool staged() const { return stage_.has_value(); }
  at::ScalarType compute_dtype() const { return compute_dtype_; }
  // Where the held parameters are.
  at::Device device() const;

  // A model built as shapes under tensor, pipeline or expert parallelism: the checkpoint whose
  // share each rank reads in parallelize (pretrained_shares.h); "" once read, or when the model
  // was built with its weights.
  const std::string& weights_dir() const { return weights_dir_; }
  void weights_read() { weights_dir_.clear(); }

  // For FLOPs: decoder layers, attention heads, head dim.
  const std::vector<int64_t>& flops_numbers() const { return flops_numbers_; }
  bool tied() const { return tied_; }
  const std::string& input_embedding_name() const { return input_embedding_name_; }
  const std::string& output_name() const { return slots_[output_slot_].name; }
  // The AutoModelForCausalLM (GIL held to use it).
  pybind11::object python_model() const { return *model_; }

  // Puts the current slot tensors of `slots` into the Python modules (GIL held).
  void push(const std::vector<size_t>& slots);
  void visit_slots(const std::vector<size_t>& slots, const models::ParameterVisitor& visit);

 private:
  struct Slot {
    std::string name;
    at::Tensor tensor;
    at::Tensor released;  // a pipeline stage's: on the meta device, what another stage holds
  };
  void patch(HfUnit& unit, pybind11::object module);
  // The decoder forward of the whole model, with positions and document ids when defined.
  models::ModelOutput run(const at::Tensor& input_ids, const models::PackedDocuments& documents);
  bool holds_slot(size_t slot, int64_t unit) const;

  at::ScalarType compute_dtype_;
  std::vector<Slot> slots_;
  PyRef model_, helper_, decoder_, sites_, config_json_;
  size_t output_slot_ = 0;
  bool tied_ = false;
  bool router_logits_ = false;
  std::string input_embedding_name_;
  std::vector<int64_t> flops_numbers_;
  bool pass_document_ids_ = false;
  std::string weights_dir_;
  // Under pipeline parallelism: this stage's parts and the stand-in that receives the previous
  // stage's output (stages.py).
  std::optional<models::StageParts> stage_;
  PyRef receiver_;
  PyRef generation_cache_;  // Transformers' KV cache of the current generation
  std::unique_ptr<HfUnit> embedding_, root_;
  std::vector<std::unique_ptr<HfUnit>> layers_;
  // QLoRA's NF4 weights by slot (whose tensor is then undefined).
  std::map<size_t, std::shared_ptr<models::Nf4Base>> quantized_;
};

}  // namespace titan::transformers_backend
