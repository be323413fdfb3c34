#include "titan/models/qwen3/config_functions.h"

#include <string>

namespace titan::models {
namespace {

using config::TrainerConfig;

// A tiny model with the real Qwen3 vocabulary (151936) that trains on 2 CPU cores. The
// TrainerConfig defaults are already these debug settings; they are spelled out here so the
// function reads as the whole recipe.
TrainerConfig debug_model(const std::string& flavor, const std::string& name) {
  TrainerConfig c;
  c.job.dump_folder = "./outputs/" + name;
  c.job.description = "Qwen3 " + flavor + " debug training";
  c.model.name = "qwen3";
  c.model.flavor = flavor;
  c.model.hf_assets_path = "assets/qwen3-tokenizer";
  c.training.steps = 20;
  c.training.local_batch_size = 4;
  c.training.seq_len = 256;
  c.training.device = "auto";
  c.optimizer.lr = 8e-4;
  c.lr_scheduler.warmup_steps = 2;
  c.metrics.log_freq = 1;
  return c;
}

// Training from scratch at a published size (torchtitan-like recipe: AdamW 3e-4 with warmup,
// 4096-token sequences, bf16 compute on fp32 master weights, selective activation
// checkpointing). Bigger models get smaller per-device batches and learning rates.
TrainerConfig pretrain(const std::string& flavor, const std::string& name, int64_t local_batch_size,
                       double lr, const std::string& ac_mode) {
  TrainerConfig c;
  c.job.dump_folder = "./outputs/" + name;
  c.job.description = "Qwen3 " + flavor + " training from scratch";
  c.model.name = "qwen3";
  c.model.flavor = flavor;
  c.model.hf_assets_path = "assets/qwen3-tokenizer";
  c.training.steps = 1000;
  c.training.local_batch_size = local_batch_size;
  c.training.seq_len = 4096;
  c.training.max_norm = 1.0;
  c.training.dtype = "float32";
  c.training.mixed_precision_param = "auto";  // bfloat16 on CUDA
  c.training.device = "auto";
  c.optimizer.lr = lr;
  c.optimizer.weight_decay = 0.1;
  c.lr_scheduler.warmup_steps = 200;
  c.lr_scheduler.decay_type = "linear";
  c.lr_scheduler.min_lr_factor = 0.1;
  c.activation_checkpoint.mode = ac_mode;
  c.checkpoint.enable = true;
  c.checkpoint.interval = 500;
  c.checkpoint.keep_latest_k = 3;
  c.metrics.log_freq = 10;
  return c;
}

// MoE from scratch: HF's auxiliary load-balancing loss (the only balancing that survives an
// export to Hugging Face, whose Qwen3-MoE has no expert bias).
TrainerConfig pretrain_moe(const std::string& flavor, const std::string& name,
                           int64_t local_batch_size, double lr, const std::string& ac_mode) {
  TrainerConfig c = pretrain(flavor, name, local_batch_size, lr, ac_mode);
  c.model.moe_load_balancing = "aux_loss";
  c.model.router_aux_loss_coef = 0.001;
  return c;
}

// Fine-tuning a published checkpoint: checkpoint.initial_load_path names its Hugging Face folder
// (default assets/hf/Qwen3-<size>, as downloaded from Qwen/Qwen3-<size>), whose config.json
// gives the model's dimensions (flavor auto, so any Qwen3 folder works; the size only picks the
// batch size and activation checkpointing) and whose tokenizer is used. A small learning rate,
// warmup over ~3% of the steps, cosine decay, no weight decay (the HF Trainer's defaults), and
// a bf16 Hugging Face export at the end.
TrainerConfig finetune(const std::string& flavor, const std::string& name, int64_t local_batch_size,
                       const std::string& ac_mode) {
  TrainerConfig c;
  c.job.dump_folder = "./outputs/" + name;
  c.job.description = "Qwen3 " + flavor + " fine-tune";
  c.model.name = "qwen3";
  c.model.flavor = "auto";
  c.model.hf_assets_path = "assets/hf/Qwen3-" + flavor;
  c.model.hf_model = "Qwen/Qwen3-" + flavor;
  // Matches HF fine-tuning, where output_router_logits is false: no auxiliary loss.
  c.model.moe_load_balancing = "none";
  c.training.steps = 1000;
  c.training.local_batch_size = local_batch_size;
  c.training.seq_len = 4096;
  c.training.max_norm = 1.0;
  c.training.device = "auto";
  c.optimizer.lr = 2e-5;
  c.optimizer.weight_decay = 0.0;
  c.lr_scheduler.warmup_steps = 30;
  c.lr_scheduler.decay_type = "cosine";
  c.lr_scheduler.min_lr_factor = 0.0;
  c.activation_checkpoint.mode = ac_mode;
  c.checkpoint.initial_load_path = "";  // empty: the weights of model.hf_assets_path
  c.checkpoint.initial_load_in_hf = true;
  c.checkpoint.initial_load_model_only = true;
  c.checkpoint.enable = true;
  c.checkpoint.interval = 500;
  c.checkpoint.keep_latest_k = 3;
  c.checkpoint.last_save_in_hf = true;
  c.checkpoint.last_save_model_only = true;
  c.checkpoint.export_dtype = "bfloat16";
  c.metrics.log_freq = 10;
  return c;
}

// `make train`: the debug model on the local Python-stdlib corpus with the real Qwen3
// tokenizer, sized to finish in a few minutes on 2 CPU cores with the loss clearly falling,
// ending with a Hugging Face export that transformers loads.
TrainerConfig default_job() {
  TrainerConfig c = debug_model("debugmodel", "default_job");
  c.job.description = "titan-cpp default job: Qwen3 debugmodel on the Python stdlib corpus";
  c.training.dataset = "python_stdlib";
  c.training.dataset_path = "assets/corpus/python_stdlib.jsonl";
  // Sized for about 3 minutes on 2 CPU cores: the loss falls from ~12 to ~7.
  c.training.steps = 70;
  c.training.local_batch_size = 4;
  c.training.seq_len = 128;
  c.optimizer.lr = 2e-3;
  c.lr_scheduler.warmup_steps = 5;
  c.lr_scheduler.decay_type = "linear";
  c.lr_scheduler.min_lr_factor = 0.1;
  c.checkpoint.last_save_in_hf = true;
  c.metrics.log_freq = 10;
  return c;
}

// The third training path: the native Qwen3-MoE with the fused kernels of kernels/cpu and
// kernels/cuda attached through the override registry (the counterpart of a vendor recipe
// that attaches its MoE kernels to torchtitan's Qwen3 with an override). The ops without a
// kernel for the run's device (rope has a CUDA kernel only) keep
// reference there: override.fallback, with a warning.
void use_fused_kernels(TrainerConfig& c) {
  c.overrides.imports = {"moe_experts=fused", "rms_norm=fused", "rope=fused",
                         "cross_entropy=fused"};
  c.overrides.fallback = true;
}

// titan_kernels_qwen3(): the recipe of the Transformers backend's
// transformers_modeling_backend_full (and _native_qwen3) on Qwen3-30B-A3B (tokenizer and, when
// present, config.json from assets/hf/Qwen3-30B-A3B, checked against the flavor), with the native
// model and the fused kernels. The three recipe functions differ only in the model and the kernels:
// the same data, batch, schedule, auxiliary loss, checkpointing and bf16 Hugging Face export, so
// that from one base they train to the same losses (tests/integration/test_recipes.py).
TrainerConfig titan_kernels_qwen3() {
  TrainerConfig c;
  c.job.dump_folder = "./outputs/titan_kernels_qwen3";
  c.job.description = "Qwen3-30B-A3B, native model with the fused kernels";
  c.model.name = "qwen3";
  c.model.flavor = "30B-A3B";
  c.model.hf_model = "Qwen/Qwen3-30B-A3B";
  c.model.hf_assets_path = "assets/hf/Qwen3-30B-A3B";
  c.training.dataset = "python_stdlib";
  c.training.dataset_path = "assets/corpus/python_stdlib.jsonl";
  c.training.steps = 1000;
  c.training.local_batch_size = 2;
  c.training.seq_len = 2048;
  c.training.device = "auto";
  c.parallelism.data_parallel_shard_degree = -1;
  c.model.moe_load_balancing = "aux_loss";
  c.model.router_aux_loss_coef = 0.001;
  c.optimizer.lr = 3e-4;
  c.lr_scheduler.warmup_steps = 100;
  c.activation_checkpoint.mode = "selective";
  c.checkpoint.last_save_in_hf = true;
  c.checkpoint.export_dtype = "bfloat16";
  c.metrics.log_freq = 10;
  use_fused_kernels(c);
  return c;
}

// The MoE debug model (8 experts, top-2) with the same kernels; 2 CPU cores: qwen3_debugmodel_moe
// with the kernels attached. With --model.flavor auto and a folder with a config.json in
// model.hf_assets_path, the model comes from there instead.
TrainerConfig titan_kernels_qwen3_debugmodel() {
  TrainerConfig c = debug_model("debugmodel_moe", "titan_kernels_qwen3_debugmodel");
  c.job.description = "Qwen3-MoE debug model with the fused kernels";
  c.model.moe_load_balancing = "aux_loss";
  c.parallelism.data_parallel_shard_degree = -1;
  use_fused_kernels(c);
  return c;
}

// SFT: chat records (training.dataset_path, {"messages": [...]}) rendered with the model's chat
// template, only the assistant turns trained, conversations packed back to back with document
// masking so that none sees another.
void use_sft(TrainerConfig& c) {
  c.training.sft = true;
  c.training.packing = "hf_flattening";
  c.training.document_masking = true;
  c.training.shuffle = true;
  c.training.dataset = "chat";
  c.training.dataset_path = "assets/sft/chat.jsonl";
}

// Qwen3-0.6B instruction-tuned from its published checkpoint.
TrainerConfig sft_0_6b() {
  TrainerConfig c = finetune("0.6B", "qwen3_0_6b_sft", 4, "selective");
  c.job.description = "Qwen3-0.6B SFT on chat records";
  use_sft(c);
  c.training.seq_len = 2048;
  c.training.steps = 500;
  return c;
}

// The debug model on chat records with the real tokenizer (and its chat template); 2 CPU cores.
TrainerConfig sft_debugmodel() {
  TrainerConfig c = debug_model("debugmodel", "qwen3_debugmodel_sft");
  c.job.description = "Qwen3 debug model SFT on chat records";
  use_sft(c);
  return c;
}

// LoRA (docs/lora.md): adapters on every attention and MLP projection of a frozen base, at the
// learning rate LoRA wants (10x a full fine-tune's), no weight decay, both exports at the end.
TrainerConfig with_lora(TrainerConfig c, const std::string& name, int64_t rank, double dropout) {
  c.job.dump_folder = "./outputs/" + name;
  c.model.converters = {"lora"};
  c.lora.rank = rank;
  c.lora.alpha = 2.0 * static_cast<double>(rank);
  c.lora.dropout = dropout;
  c.lora.export_format = "both";
  c.optimizer.lr = 2e-4;
  c.optimizer.weight_decay = 0.0;
  return c;
}

// QLoRA: the same with the frozen projections in NF4, their scales double-quantised.
TrainerConfig with_qlora(TrainerConfig c, const std::string& name, int64_t rank, double dropout) {
  c = with_lora(std::move(c), name, rank, dropout);
  c.lora.base_quantization = "nf4";
  c.lora.double_quantization = true;
  return c;
}

// Expert parallelism as torchtitan's Qwen3 MoE flavors use it: experts spread over `ep` ranks,
// then FSDP-sharded over the rest (efsdp); dense weights FSDP over every rank.
TrainerConfig with_expert_parallel(TrainerConfig c, int64_t ep) {
  c.parallelism.expert_parallel_degree = ep;
  c.parallelism.data_parallel_shard_degree = -1;
  return c;
}

// Tensor parallelism with sequence parallelism, FSDP over the remaining ranks (2-D).
TrainerConfig with_tensor_parallel(TrainerConfig c, int64_t tp) {
  c.parallelism.tensor_parallel_degree = tp;
  c.parallelism.enable_sequence_parallel = true;
  c.parallelism.data_parallel_shard_degree = -1;
  return c;
}

struct Size {
  const char* config;  // config-function suffix
  const char* flavor;
  int64_t local_batch_size;
  double lr;
  const char* ac_mode;
  bool moe;
};

constexpr Size kSizes[] = {
    {"0_6b", "0.6B", 4, 3e-4, "selective", false},
    {"1_7b", "1.7B", 4, 3e-4, "selective", false},
    {"4b", "4B", 2, 3e-4, "selective", false},
    {"8b", "8B", 2, 3e-4, "selective", false},
    {"14b", "14B", 1, 2e-4, "selective", false},
    {"32b", "32B", 1, 1.5e-4, "full", false},
    {"30b_a3b", "30B-A3B", 2, 3e-4, "selective", true},
    {"235b_a22b", "235B-A22B", 1, 1.5e-4, "full", true},
};

}  // namespace

void register_qwen3_configs(config::ConfigRegistry& registry) {
  registry.add(
      "qwen3", "qwen3_debugmodel", [] { return debug_model("debugmodel", "qwen3_debugmodel"); },
      "tiny dense Qwen3 (real vocabulary), 20 steps; trains on 2 CPU cores");
  registry.add(
      "qwen3", "qwen3_debugmodel_moe",
      [] {
        TrainerConfig c = debug_model("debugmodel_moe", "qwen3_debugmodel_moe");
        c.model.moe_load_balancing = "aux_loss";
        return c;
      },
      "tiny Qwen3-MoE (8 experts, top-2, real vocabulary), 20 steps");
  registry.add("qwen3", "titan_kernels_qwen3", titan_kernels_qwen3,
               "Qwen3-30B-A3B (config from assets/hf/Qwen3-30B-A3B) with the fused kernels, FSDP "
               "over every rank");
  registry.add("qwen3", "titan_kernels_qwen3_debugmodel", titan_kernels_qwen3_debugmodel,
               "the MoE debug model with the fused kernels; 2 CPU cores");
  registry.add("qwen3", "qwen3_0_6b_sft", sft_0_6b,
               "SFT of Qwen/Qwen3-0.6B (assets/hf/Qwen3-0.6B) on chat records "
               "(training.dataset_path, {\"messages\": [...]}), assistant turns only, document "
               "masking");
  registry.add("qwen3", "qwen3_debugmodel_sft", sft_debugmodel,
               "the debug model on chat records: SFT, assistant turns only, document masking");
  registry.add(
      "qwen3", "qwen3_30b_a3b_ep8",
      [] {
        TrainerConfig c = with_expert_parallel(
            pretrain_moe("30B-A3B", "qwen3_30b_a3b_ep8", 2, 3e-4, "selective"), 8);
        c.job.description = "Qwen3-30B-A3B, experts over 8 ranks (EP 8), FSDP over all";
        return c;
      },
      "Qwen3-30B-A3B from scratch with expert parallelism over 8 ranks (128 experts: 16 a "
      "rank) and FSDP over every rank; a multiple of 8 ranks");
  registry.add(
      "qwen3", "qwen3_8b_tp2",
      [] {
        TrainerConfig c =
            with_tensor_parallel(pretrain("8B", "qwen3_8b_tp2", 2, 3e-4, "selective"), 2);
        c.job.description = "Qwen3-8B, tensor parallelism 2 x FSDP";
        return c;
      },
      "Qwen3-8B from scratch with tensor parallelism 2 (sequence parallel) x FSDP over the "
      "other ranks; an even number of ranks");
  registry.add(
      "qwen3", "qwen3_debugmodel_moe_ep2",
      [] {
        TrainerConfig c = debug_model("debugmodel_moe", "qwen3_debugmodel_moe_ep2");
        c.model.moe_load_balancing = "aux_loss";
        return with_expert_parallel(c, 2);
      },
      "the MoE debug model with expert parallelism 2 x FSDP; 2 or 4 CPU processes");
  registry.add(
      "qwen3", "qwen3_debugmodel_tp2",
      [] { return with_tensor_parallel(debug_model("debugmodel", "qwen3_debugmodel_tp2"), 2); },
      "the debug model with tensor parallelism 2 x FSDP; 2 or 4 CPU processes");
  registry.add(
      "qwen3", "qwen3_0_6b_lora",
      [] {
        TrainerConfig c =
            with_lora(finetune("0.6B", "", 4, "selective"), "qwen3_0_6b_lora", 16, 0.05);
        c.job.description = "Qwen3-0.6B LoRA fine-tune";
        return c;
      },
      "LoRA (rank 16, alpha 32) on every projection of the frozen Qwen/Qwen3-0.6B "
      "(checkpoint.initial_load_path); PEFT adapter + merged export");
  registry.add(
      "qwen3", "qwen3_0_6b_qlora",
      [] {
        TrainerConfig c =
            with_qlora(finetune("0.6B", "", 4, "selective"), "qwen3_0_6b_qlora", 16, 0.05);
        c.job.description = "Qwen3-0.6B QLoRA fine-tune (NF4 base)";
        return c;
      },
      "QLoRA: the same with the frozen projections in NF4 (double-quantised scales)");
  registry.add(
      "qwen3", "qwen3_0_6b_sft_lora",
      [] {
        TrainerConfig c = with_lora(sft_0_6b(), "qwen3_0_6b_sft_lora", 16, 0.05);
        c.job.description = "Qwen3-0.6B SFT with LoRA on chat records";
        return c;
      },
      "SFT of Qwen/Qwen3-0.6B with LoRA (rank 16): chat records, assistant turns only, document "
      "masking");
  registry.add(
      "qwen3", "qwen3_debugmodel_lora",
      [] {
        TrainerConfig c = with_lora(debug_model("debugmodel", ""), "qwen3_debugmodel_lora", 8, 0.0);
        c.optimizer.lr = 2e-3;
        c.checkpoint.last_save_in_hf = true;
        return c;
      },
      "LoRA on the debug model's projections (a seeded base unless checkpoint.initial_load_path); "
      "2 CPU cores");
  registry.add(
      "qwen3", "qwen3_debugmodel_qlora",
      [] {
        TrainerConfig c =
            with_qlora(debug_model("debugmodel", ""), "qwen3_debugmodel_qlora", 8, 0.0);
        c.optimizer.lr = 2e-3;
        c.checkpoint.last_save_in_hf = true;
        return c;
      },
      "QLoRA (NF4 base) on the debug model; 2 CPU cores");
  registry.add(
      "qwen3", "qwen3_debugmodel_sft_lora",
      [] {
        TrainerConfig c = with_lora(sft_debugmodel(), "qwen3_debugmodel_sft_lora", 8, 0.0);
        c.optimizer.lr = 2e-3;
        return c;
      },
      "the debug model's SFT on chat records with LoRA; 2 CPU cores");
  registry.add("qwen3", "qwen3_debugmodel_default_job", default_job,
               "the `make train` job: debugmodel on assets/corpus/python_stdlib.jsonl, HF export");
  for (const Size& size : kSizes) {
    const std::string name = std::string("qwen3_") + size.config;
    registry.add(
        "qwen3", name,
        [size, name] {
          return size.moe
                     ? pretrain_moe(size.flavor, name, size.local_batch_size, size.lr, size.ac_mode)
                     : pretrain(size.flavor, name, size.local_batch_size, size.lr, size.ac_mode);
        },
        std::string("Qwen3-") + size.flavor + " from scratch, seq_len 4096");
  }
  for (const Size& size : kSizes) {
    const std::string name = std::string("qwen3_") + size.config + "_finetune";
    registry.add(
        "qwen3", name,
        [size, name] { return finetune(size.flavor, name, size.local_batch_size, size.ac_mode); },
        std::string("fine-tune the Qwen3 HF folder of checkpoint.initial_load_path (default ") +
            "assets/hf/Qwen3-" + size.flavor + "; dimensions from its config.json), sized for " +
            size.flavor + ", lr 2e-5 cosine, bf16 HF export");
  }
}

}  // namespace titan::models
