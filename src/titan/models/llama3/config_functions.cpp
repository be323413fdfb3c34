#include "titan/models/llama3/config_functions.h"

namespace titan::models {
namespace {

using config::TrainerConfig;

// A tiny Llama 3 with the Qwen3 tokenizer's vocabulary (the default assets) that trains on 2
// CPU cores, as qwen3_debugmodel does.
TrainerConfig debug_model() {
  TrainerConfig c;
  c.job.dump_folder = "./outputs/llama3_debugmodel";
  c.job.description = "Llama 3 debugmodel debug training";
  c.model.name = "llama3";
  c.model.flavor = "debugmodel";
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

// Llama 3.1 8B from scratch, torchtitan's llama3_8b recipe (AdamW 3e-4, warmup 200, 8192-token
// sequences, bf16 compute on fp32 master weights, selective activation checkpointing); the
// tokenizer and config.json from assets/hf/Llama-3.1-8B (meta-llama/Llama-3.1-8B), checked
// against the flavor.
TrainerConfig pretrain_8b() {
  TrainerConfig c;
  c.job.dump_folder = "./outputs/llama3_8b";
  c.job.description = "Llama 3.1 8B training from scratch";
  c.model.name = "llama3";
  c.model.flavor = "8B";
  c.model.hf_model = "meta-llama/Llama-3.1-8B";
  c.model.hf_assets_path = "assets/hf/Llama-3.1-8B";
  c.training.steps = 1000;
  c.training.local_batch_size = 1;
  c.training.seq_len = 8192;
  c.training.max_norm = 1.0;
  c.training.dtype = "float32";
  c.training.mixed_precision_param = "auto";  // bfloat16 on CUDA
  c.training.device = "auto";
  c.optimizer.lr = 3e-4;
  c.optimizer.weight_decay = 0.1;
  c.lr_scheduler.warmup_steps = 200;
  c.lr_scheduler.decay_type = "linear";
  c.lr_scheduler.min_lr_factor = 0.1;
  c.activation_checkpoint.mode = "selective";
  c.checkpoint.enable = true;
  c.checkpoint.interval = 500;
  c.checkpoint.keep_latest_k = 3;
  c.metrics.log_freq = 10;
  return c;
}

}  // namespace

void register_llama3_configs(config::ConfigRegistry& registry) {
  registry.add("llama3", "llama3_debugmodel", debug_model,
               "tiny Llama 3 (Qwen3 tokenizer vocabulary), 20 steps; trains on 2 CPU cores");
  registry.add("llama3", "llama3_8b", pretrain_8b,
               "Llama 3.1 8B from scratch (tokenizer and config from assets/hf/Llama-3.1-8B), "
               "seq_len 8192");
}

}  // namespace titan::models
