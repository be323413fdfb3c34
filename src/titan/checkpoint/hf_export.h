// Hugging Face export: writes a directory that `AutoModelForCausalLM.from_pretrained` loads
// (docs/qwen3.md sections 5.2 and 5.3): config.json, generation_config.json, the weights as
// model.safetensors or greedy shards plus model.safetensors.index.json, and the tokenizer
// files. Used at the end of training (checkpoint.last_save_in_hf) and by `titan convert`.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "titan/checkpoint/tensor_layout.h"
#include "titan/models/model_spec.h"

namespace titan::checkpoint {

// "5GB" -> 5'000'000'000. Decimal units as Hugging Face (KB, MB, GB, TB = 1e3.. 1e12), binary
// units KiB, MiB, GiB, TiB, case-insensitive, optional "B"; a bare number is bytes. Fractions
// are allowed with a unit ("1.5GB"). Throws titan::Error naming the text.
uint64_t parse_size(const std::string& text);

// "float32" | "bfloat16" | "float16" -> the torch type; throws naming anything else.
at::ScalarType parse_export_dtype(const std::string& name);

// The shard plan huggingface_hub's split_torch_state_dict_into_shards makes: greedy in order;
// a tensor that does not fit closes the current shard; a tensor larger than the limit gets a
// shard of its own (placed where it occurs, while the current shard stays open).
// `sizes[i]` is tensor i's byte size; returns the tensor indices of each shard.
std::vector<std::vector<size_t>> plan_shards(const std::vector<uint64_t>& sizes,
                                             uint64_t max_shard_bytes);

// The native tensors an export writes, in order: each one's name and a meta tensor of its
// global shape and dtype, and the whole tensor on demand. With a split layout `full` is a
// collective: every rank asks for the same tensors in the same order.
struct NativeTensors {
  std::vector<std::pair<std::string, at::Tensor>> metas;
  std::function<at::Tensor(size_t index)> full;
};
// The model's parameters, gathered through `layout` (what a plain export writes).
NativeTensors model_parameters(models::ModelTensors& model, const TensorLayout& layout);

// Exports the model to `out_dir`. Floating-point tensors are cast to `export_dtype`
// (round-to-nearest-even); others are written as they are. Tokenizer files found in
// `tokenizer_src_dir` (may be empty) are copied; its generation_config.json is copied when
// present, otherwise one is derived from config.json. Everything is written into a temporary
// sibling folder, fsynced and renamed into place; an existing `out_dir` is replaced only once
// the new one is complete.
//
// With a sharded `layout` this is a collective: every rank calls it, each native tensor is
// gathered in turn (streamed: never the whole model on one rank) and the coordinator writes.
// `tensors`, when given, replaces the model's parameters (a LoRA export writes the base
// weights with the adapters merged in, lora/merged_weights.h).
void export_hf_directory(models::ModelTensors& model, const models::ModelSpec& spec,
                         const std::string& out_dir, const std::string& export_dtype,
                         uint64_t max_shard_bytes, const std::string& tokenizer_src_dir,
                         const TensorLayout& layout = whole_tensors(),
                         const NativeTensors* tensors = nullptr);

// The weights + index part of the export, for a directory that already exists: shard files
// and (when sharded) model.safetensors.index.json. `hf_tensors` are in state-dict order.
// Returns the file names written.
std::vector<std::string> write_hf_weights(const std::string& dir, const NamedTensors& hf_tensors,
                                          at::ScalarType export_dtype, uint64_t max_shard_bytes);

// config.json text: 2-space indent, sorted keys, trailing newline, float fields as floats.
std::string hf_config_text(nlohmann::json config);

// generation_config.json text derived from config.json (bos/eos/pad token ids and
// transformers_version), as transformers' GenerationConfig.from_model_config does.
std::string generation_config_text(const nlohmann::json& config);

}  // namespace titan::checkpoint
