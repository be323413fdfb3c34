#include "titan/models/transformers_configs.h"

namespace titan::models {
namespace {

using config::TrainerConfig;

constexpr const char* kModule = "transformers_modeling_backend";

// transformers_modeling_backend_full(): Transformers' model of an HF model (id + the folder of
// its files), the dataset, steps, local batch size and the data-parallel shard degree.
TrainerConfig full() {
  TrainerConfig c;
  c.job.dump_folder = "./outputs/transformers_modeling_backend_full";
  c.job.description = "Qwen3-0.6B with the Transformers modeling backend";
  c.model.name = "transformers";
  c.model.hf_model = "Qwen/Qwen3-0.6B";
  c.model.hf_assets_path = "assets/hf/Qwen3-0.6B";
  c.model.flavor = "auto";  // the dimensions come from hf_assets_path/config.json
  c.training.dataset = "python_stdlib";
  c.training.dataset_path = "assets/corpus/python_stdlib.jsonl";
  c.training.steps = 1000;
  c.training.local_batch_size = 2;
  c.training.seq_len = 2048;
  c.training.device = "auto";
  c.parallelism.data_parallel_shard_degree = -1;
  // The recipe's three config functions balance MoE experts the same way: the auxiliary loss
  // (the only balancing Transformers' Qwen3-MoE has; no effect on a dense model).
  c.model.moe_load_balancing = "aux_loss";
  c.model.router_aux_loss_coef = 0.001;
  c.optimizer.lr = 3e-4;
  c.lr_scheduler.warmup_steps = 100;
  c.activation_checkpoint.mode = "selective";
  c.checkpoint.last_save_in_hf = true;  // what a recipe hands on: a folder Transformers loads
  c.checkpoint.export_dtype = "bfloat16";
  c.metrics.log_freq = 10;
  return c;
}

// The same job with the native Qwen3: the one line of the recipe.
TrainerConfig native_qwen3(TrainerConfig c) {
  c.model.name = "qwen3";
  return c;
}

// The debug model of module qwen3 (real vocabulary, hidden 256, 4 layers), as a fresh
// Transformers config; trains on 2 CPU cores. With --model.flavor auto and a folder with a
// config.json in model.hf_assets_path, the model comes from there instead.
TrainerConfig debugmodel(bool moe) {
  TrainerConfig c = full();
  const std::string name =
      std::string("transformers_modeling_backend_debugmodel") + (moe ? "_moe" : "");
  c.job.dump_folder = "./outputs/" + name;
  c.job.description = std::string("debug-sized Qwen3") + (moe ? "-MoE" : "") +
                      " with the Transformers modeling backend";
  c.model.hf_model = moe ? "qwen3_moe" : "qwen3";
  c.model.hf_assets_path = "assets/qwen3-tokenizer";
  c.model.flavor = "debugmodel";
  c.model.hf_config_overrides = {
      "vocab_size=151936",
      "hidden_size=256",
      "num_hidden_layers=4",
      "num_attention_heads=8",
      "num_key_value_heads=4",
      "head_dim=64",
      "rms_norm_eps=1e-06",
      "max_position_embeddings=40960",
      "bos_token_id=151643",
      "eos_token_id=151645",
      "tie_word_embeddings=true",
      R"(rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})"};
  if (moe) {
    for (const char* extra : {"moe_intermediate_size=256", "num_experts=8", "num_experts_per_tok=2",
                              "norm_topk_prob=true", "intermediate_size=768"})
      c.model.hf_config_overrides.push_back(extra);
  } else {
    c.model.hf_config_overrides.emplace_back("intermediate_size=768");
  }
  // Transformers' default for a fresh config (output_router_logits false): the logged loss is
  // the model's own cross-entropy.
  c.model.moe_load_balancing = "none";
  c.training.steps = 20;
  c.training.local_batch_size = 4;
  c.training.seq_len = 256;
  c.parallelism.data_parallel_shard_degree = -1;
  c.optimizer.lr = 8e-4;
  c.lr_scheduler.warmup_steps = 2;
  c.activation_checkpoint.mode = "none";
  c.metrics.log_freq = 1;
  return c;
}

// Supervised fine-tuning of the pretrained weights on chat records (training.sft: only the
// assistant turns are trained; a small learning rate, cosine decay, a bf16 Hugging Face export
// at the end). The Transformers backend has no block-causal attention yet, so the packed
// conversations see each other (titan warns; the native model's SFT configs mask them).
TrainerConfig sft_full() {
  TrainerConfig c = full();
  c.job.dump_folder = "./outputs/transformers_modeling_backend_sft_full";
  c.job.description = "SFT of Qwen/Qwen3-0.6B on chat records with the Transformers backend";
  c.training.sft = true;
  c.training.shuffle = true;
  c.training.dataset = "chat";
  c.training.dataset_path = "assets/sft/chat.jsonl";
  c.checkpoint.initial_load_in_hf = true;
  c.checkpoint.last_save_in_hf = true;
  c.checkpoint.export_dtype = "bfloat16";
  c.optimizer.lr = 2e-5;
  c.optimizer.weight_decay = 0.0;
  c.lr_scheduler.warmup_steps = 30;
  c.lr_scheduler.decay_type = "cosine";
  return c;
}

}  // namespace

void register_transformers_configs(config::ConfigRegistry& r) {
  r.add(kModule, "transformers_modeling_backend_full", full,
        "Transformers' own Qwen3-0.6B from assets/hf/Qwen3-0.6B, FSDP over every rank");
  r.add(
      kModule, "transformers_modeling_backend_native_qwen3", [] { return native_qwen3(full()); },
      "the same job with the native Qwen3 (model.name qwen3)");
  r.add(kModule, "transformers_modeling_backend_sft_full", sft_full,
        "SFT of the pretrained Qwen/Qwen3-0.6B on chat records (training.sft) with the "
        "Transformers backend");
  r.add(
      kModule, "transformers_modeling_backend_debugmodel", [] { return debugmodel(false); },
      "debug-sized Qwen3 with the Transformers backend; 2 CPU cores");
  r.add(
      kModule, "transformers_modeling_backend_debugmodel_moe", [] { return debugmodel(true); },
      "debug-sized Qwen3-MoE (8 experts, top-2) with the Transformers backend");
  r.add(
      kModule, "transformers_modeling_backend_native_qwen3_debugmodel",
      [] {
        TrainerConfig c = native_qwen3(debugmodel(false));
        c.model.hf_config_overrides = {};  // the native flavor "debugmodel" has these sizes
        return c;
      },
      "the debug job with the native Qwen3");
}

}  // namespace titan::models
