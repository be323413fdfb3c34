#include "titan/train/state/final_export.h"

#include <filesystem>
#include <iostream>

#include "titan/checkpoint/checkpoint_names.h"
#include "titan/checkpoint/hf_export.h"
#include "titan/lora/merged_weights.h"
#include "titan/lora/peft_adapter.h"

namespace titan::train {
namespace {

// "owner/name" that is not a path on this machine: a Hugging Face hub id.
bool names_hub_model(const std::string& id) {
  std::error_code ec;
  const size_t slash = id.find('/');
  return slash != std::string::npos && slash > 0 && slash + 1 < id.size() &&
         id.find('/', slash + 1) == std::string::npos && id[0] != '.' &&
         !std::filesystem::exists(id, ec);
}

}  // namespace

void export_lora(const models::ModelSpec& spec, models::ModelTensors& model,
                 const lora::LoraSetup& setup, const std::string& merged_dir,
                 const std::string& adapter_dir, const std::string& export_dtype,
                 uint64_t max_shard_bytes, const std::string& tokenizer_dir,
                 const std::string& base_model_name, const checkpoint::TensorLayout& layout) {
  if (!adapter_dir.empty()) {
    lora::write_peft_adapter(adapter_dir, model, setup.targets, setup.config, base_model_name,
                             layout);
    if (layout.coordinator())
      std::cout << "[titan] exported the PEFT adapter to " << adapter_dir << std::endl;
  }
  if (!merged_dir.empty()) {
    const checkpoint::NativeTensors merged = lora::merged_weights(model, setup, layout);
    checkpoint::export_hf_directory(model, spec, merged_dir, export_dtype, max_shard_bytes,
                                    tokenizer_dir, layout, &merged);
    if (layout.coordinator()) {
      std::cout << "[titan] exported the merged Hugging Face checkpoint to " << merged_dir
                << std::endl;
      // QLoRA trained its adapters on the NF4 base: merged, they sit on its dequantised
      // weights, while the adapter folder is applied to the original full-precision base.
      if (setup.config.base_quantization == "nf4" && !adapter_dir.empty()) {
        std::cout << "[titan] note: QLoRA's two exports are two models: " << merged_dir
                  << " is the adapters merged into the NF4 base (dequantised), " << adapter_dir
                  << " applies them to the original base; their logits differ by the NF4 "
                     "quantisation error (docs/lora.md)"
                  << std::endl;
      }
    }
  }
}

ExportedFolders export_hf_if_requested(const config::TrainerConfig& cfg,
                                       const models::ModelSpec& spec, models::ModelTensors& model,
                                       int64_t step, const checkpoint::TensorLayout& layout,
                                       const lora::LoraSetup* lora,
                                       const checkpoint::NativeTensors* tensors) {
  if (!cfg.checkpoint.last_save_in_hf) return {};
  const std::string dir = checkpoint::hf_export_folder(cfg.job.dump_folder, step);
  if (lora != nullptr) {
    ExportedFolders out;
    const std::string& format = cfg.lora.export_format;
    if (format != "merged") out.adapter = dir + "-adapter";
    if (format != "adapter") out.hf = dir;
    // The adapter names its base as PEFT does (AutoPeftModelForCausalLM loads it from there):
    // the hub id model.hf_model names (what an adapter shared on the hub points to, and what
    // the fine-tune config functions set: Qwen/Qwen3-0.6B), else the folder it trained on.
    const std::string base_name = lora->base.seed() || names_hub_model(cfg.model.hf_model)
                                      ? cfg.model.hf_model
                                      : lora->base.folder();
    export_lora(spec, model, *lora, out.hf, out.adapter, cfg.checkpoint.export_dtype,
                checkpoint::parse_size(cfg.checkpoint.hf_max_shard_size), cfg.model.hf_assets_path,
                base_name, layout);
    return out;
  }
  checkpoint::export_hf_directory(model, spec, dir, cfg.checkpoint.export_dtype,
                                  checkpoint::parse_size(cfg.checkpoint.hf_max_shard_size),
                                  cfg.model.hf_assets_path, layout, tensors);
  if (layout.coordinator())
    std::cout << "[titan] exported Hugging Face checkpoint to " << dir << std::endl;
  return {dir, ""};
}

}  // namespace titan::train
