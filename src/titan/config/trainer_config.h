// The configuration tree: plain structs with torchtitan's section and field names.
//
// Each section lists its fields once, in visit(), each with its one-line description (what
// `titan configs --print` writes as a comment above it); the TOML overlay, the CLI overrides,
// printing and unknown-key errors are all generic code over that list (config_fields.h), so a
// new field is added here, with its description, and nowhere else. Value checks live in
// validate.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace titan::config {

struct JobConfig {
  std::string dump_folder = "./outputs";
  std::string description = "titan-cpp training job";
  std::string config_notes = "each";
  template <class V>
  void visit(V& v) {
    v("dump_folder", dump_folder,
      "folder of the run: config.toml, metrics.jsonl, checkpoints and exports (relative to the "
      "current directory)");
    v("description", description,
      "a name for the run, printed at start-up and used as the title of titan plot");
    v("config_notes", config_notes,
      "the notes on torchtitan's keys that titan renames or that ask nothing of it: each (one line "
      "each), summary (one line) or off");
  }
};

struct ModelConfig {
  std::string name = "qwen3";
  std::string flavor = "debugmodel";
  std::string hf_assets_path = "assets/qwen3-tokenizer";
  std::string hf_model = "";
  std::string moe_load_balancing = "none";
  double router_aux_loss_coef = 0.001;
  double expert_bias_update_rate = 0.001;
  std::vector<std::string> hf_config_overrides = {};
  std::string attn_implementation = "sdpa";
  std::string experts_implementation = "";
  std::vector<std::string> converters = {};
  template <class V>
  void visit(V& v) {
    v("name", name,
      "which model builds it: qwen3 (native C++ Qwen3 and Qwen3-MoE), llama3 (native C++ Llama 3) "
      "or transformers (Hugging Face Transformers' own model)");
    v("flavor", flavor,
      "a named size (debugmodel, 0.6B, 30B-A3B, ...; checked against hf_assets_path/config.json "
      "when there) or auto (every dimension from that config.json)");
    v("hf_assets_path", hf_assets_path,
      "folder with the tokenizer files and config.json; default: checkpoint.initial_load_path when "
      "that is a Hugging Face folder");
    v("hf_model", hf_model,
      "hub id the weights came from (informational for qwen3); for transformers the model: an HF "
      "folder, an id whose files are in hf_assets_path, or a model type");
    v("moe_load_balancing", moe_load_balancing,
      "MoE load balancing: none, aux_loss (HF's auxiliary loss, scaled by router_aux_loss_coef) or "
      "expert_bias (torchtitan's aux-loss-free bias update)");
    v("router_aux_loss_coef", router_aux_loss_coef,
      "weight of the auxiliary load-balancing loss (moe_load_balancing aux_loss)");
    v("expert_bias_update_rate", expert_bias_update_rate,
      "step size of the expert bias update (moe_load_balancing expert_bias)");
    v("hf_config_overrides", hf_config_overrides,
      "model.name transformers: config fields to change, FIELD=VALUE with JSON values (not applied "
      "with flavor auto)");
    v("attn_implementation", attn_implementation,
      "model.name transformers: the attention Transformers runs (sdpa, eager, ...)");
    v("experts_implementation", experts_implementation,
      "model.name transformers: the MoE experts Transformers runs (grouped_mm, eager, ...; empty: "
      "its default)");
    v("converters", converters,
      "what changes the model after it is built (torchtitan's model converters): lora (low-rank "
      "adapters on frozen weights, the lora section)");
  }
};

// LoRA and QLoRA (docs/lora.md), on when model.converters holds "lora".
struct LoraConfig {
  int64_t rank = 8;
  double alpha = 16.0;
  double dropout = 0.0;
  std::vector<std::string> target_modules = {};
  std::string base_quantization = "none";
  bool double_quantization = true;
  std::string initial_adapter_path = "";
  std::string export_format = "both";
  template <class V>
  void visit(V& v) {
    v("rank", rank, "rank r of the adapters A [r, in] and B [out, r]");
    v("alpha", alpha, "the adapters' output is scaled by alpha / rank");
    v("dropout", dropout, "dropout on the adapters' input while training (PEFT's lora_dropout)");
    v("target_modules", target_modules,
      "module paths to adapt, globs like override.imports ('*' crosses dots; a plain name such as "
      "q_proj matches that last component); empty: every attention and MLP projection");
    v("base_quantization", base_quantization,
      "none, or nf4 (QLoRA: frozen projection weights held in 4-bit NormalFloat)");
    v("double_quantization", double_quantization,
      "with nf4, quantise the NF4 scales again (bitsandbytes' compress_statistics)");
    v("initial_adapter_path", initial_adapter_path,
      "a PEFT adapter folder to start from (adapter_config.json + adapter_model.safetensors)");
    v("export_format", export_format,
      "what the final export and titan convert write: adapter (a PEFT folder), merged (a "
      "standard Hugging Face folder) or both");
  }
};

struct TrainingConfig {
  int64_t steps = 20;
  int64_t local_batch_size = 8;
  int64_t global_batch_size = -1;
  int64_t seq_len = 256;
  double max_norm = 1.0;
  std::string dtype = "float32";
  std::string mixed_precision_param = "auto";
  std::string mixed_precision_reduce = "float32";
  std::string dataset = "python_stdlib";
  std::string dataset_path = "assets/corpus/python_stdlib.jsonl";
  std::string dataset_text_field = "text";
  std::string eos_token = "<|endoftext|>";
  std::string packing = "megatron";
  bool document_masking = false;
  bool shuffle = false;
  bool sft = false;
  std::string objective = "lm";
  int64_t prefetch_batches = 2;
  int64_t seed = 0;
  bool deterministic = false;
  std::string device = "auto";
  bool skip_nonfinite_steps = false;
  template <class V>
  void visit(V& v) {
    v("steps", steps, "optimizer steps to train");
    v("local_batch_size", local_batch_size, "rows of seq_len tokens per rank per micro-batch");
    v("global_batch_size", global_batch_size,
      "rows per optimizer step over all ranks (a multiple of local_batch_size x data-parallel "
      "degree: gradient accumulation); -1: local_batch_size x data-parallel degree");
    v("seq_len", seq_len, "tokens per row");
    v("max_norm", max_norm, "gradient clipping: the largest total gradient norm");
    v("dtype", dtype,
      "dtype of the parameters the optimizer updates: float32 or bfloat16 (pure bf16 training)");
    v("mixed_precision_param", mixed_precision_param,
      "dtype forward and backward compute in: auto (bfloat16 on CUDA, float32 on the CPU), float32 "
      "or bfloat16");
    v("mixed_precision_reduce", mixed_precision_reduce,
      "dtype of the data-parallel gradient reduction: float32 or bfloat16");
    v("dataset", dataset,
      "a built-in dataset: python_stdlib or chat; sets dataset_path when that is not given");
    v("dataset_path", dataset_path,
      "dataset file, folder, glob or weighted list (jsonl, jsonl.gz/zst, Parquet, Arrow, text, "
      "token shards)");
    v("dataset_text_field", dataset_text_field,
      "the jsonl field, or Parquet/Arrow string column, that holds each document's text");
    v("eos_token", eos_token,
      "token placed after every packed document (packing torchtitan: tokenizer_config.json's "
      "eos_token unless given)");
    v("packing", packing,
      "how documents become rows: megatron (older torchtitan and Megatron-LM: documents joined "
      "by eos, windows of seq_len + 1, causal across the row), hf_flattening (Hugging Face's "
      "DataCollatorWithFlattening: the same windows, block-causal, no label crosses a document) "
      "or torchtitan (torchtitan 0.3.0: inputs and labels shifted within each document, "
      "block-causal)");
    v("document_masking", document_masking,
      "block-causal attention over packed rows: each document attends to itself only, positions "
      "restart at 0 (follows packing: true for hf_flattening and torchtitan; true alone means "
      "hf_flattening)");
    v("shuffle", shuffle,
      "visit the documents in a new order every epoch, drawn from seed (false: file order)");
    v("sft", sft,
      "supervised fine-tuning: records are conversations ({\"messages\": [...]}) rendered with the "
      "chat template; only assistant turns are trained");
    v("objective", objective,
      "what training minimises: lm (the language-model loss; with sft, of the assistant turns) "
      "or dpo (Direct Preference Optimization on preference pairs, the dpo section; "
      "docs/preference.md)");
    v("prefetch_batches", prefetch_batches,
      "batches a background thread reads, tokenizes and packs ahead (0: none)");
    v("seed", seed, "seed of the weight initialisation, shuffling and every other random draw");
    v("deterministic", deterministic,
      "use deterministic algorithms only (identical runs also need the same OMP_NUM_THREADS)");
    v("device", device, "cpu, cuda or auto (cuda when available)");
    v("skip_nonfinite_steps", skip_nonfinite_steps,
      "a step whose loss or gradient norm is not finite: false stops with an error naming the "
      "step, true skips its update and counts it");
  }
};

// Direct Preference Optimization (training.objective dpo; docs/preference.md), with the names
// and defaults of TRL's DPOConfig.
struct DpoConfig {
  double beta = 0.1;
  std::vector<std::string> loss_type = {"sigmoid"};
  std::vector<double> loss_weights = {};
  double label_smoothing = 0.0;
  std::string reference = "initial";
  bool precompute_reference = false;
  int64_t max_length = 1024;
  std::string truncation_mode = "keep_start";
  template <class V>
  void visit(V& v) {
    v("beta", beta, "how far the policy may move from the reference (TRL's beta)");
    v("loss_type", loss_type,
      "the losses summed: sigmoid (DPO), ipo, hinge, robust, sigmoid_norm, bco_pair, nca_pair, "
      "sppo_hard, apo_zero, apo_down, exo_pair, and sft (the chosen completions' token loss)");
    v("loss_weights", loss_weights, "a weight per loss_type entry; empty: 1 each");
    v("label_smoothing", label_smoothing,
      "the assumed fraction of flipped preferences, in [0, 0.5) (robust and exo_pair use it)");
    v("reference", reference,
      "the model the policy is measured against: initial (the starting weights: a frozen copy, "
      "or under LoRA the frozen base with the starting adapters, no copy of the base) or "
      "adapters_off (LoRA: the base alone)");
    v("precompute_reference", precompute_reference,
      "compute the reference's log-probabilities of every pair once before training, so that "
      "no reference is held while training (TRL's precompute_ref_log_probs)");
    v("max_length", max_length,
      "tokens per sequence (prompt + completion); longer pairs are cut (-1: no limit)");
    v("truncation_mode", truncation_mode,
      "what a cut keeps of a sequence: keep_start (pairs whose prompt alone fills max_length "
      "are skipped) or keep_end");
  }
};

// A held-out loss every `freq` steps (torchtitan's validator): the mean token loss of the first
// `steps` batches of `dataset_path` (the same batches every time), or of the whole file when
// steps is -1.
struct ValidatorConfig {
  bool enable = false;
  int64_t freq = 10;
  int64_t steps = -1;
  std::string dataset_path = "";
  template <class V>
  void visit(V& v) {
    v("enable", enable, "log a held-out loss every freq steps and at the last one");
    v("freq", freq, "steps between validations");
    v("steps", steps,
      "global batches of dataset_path to evaluate each time (the same ones every time); -1: the "
      "whole file");
    v("dataset_path", dataset_path, "the held-out dataset (any form training.dataset_path takes)");
  }
};

struct ParallelismConfig {
  int64_t data_parallel_replicate_degree = 1;
  int64_t data_parallel_shard_degree = -1;
  int64_t tensor_parallel_degree = 1;
  int64_t pipeline_parallel_degree = 1;
  std::string pipeline_parallel_schedule = "1F1B";
  int64_t pipeline_parallel_microbatch_size = 1;
  int64_t pipeline_parallel_layers_per_stage = -1;
  int64_t pipeline_parallel_first_stage_less_layers = 1;
  int64_t pipeline_parallel_last_stage_less_layers = 1;
  int64_t context_parallel_degree = 1;
  int64_t expert_parallel_degree = 1;
  std::string context_parallel_load_balancer = "headtail";
  std::string fsdp_reshard_after_forward = "default";
  // With tensor parallelism, the norms and the residual stream split over the sequence
  // (torchtitan does so whenever tensor parallelism is on).
  bool enable_sequence_parallel = true;
  template <class V>
  void visit(V& v) {
    v("data_parallel_replicate_degree", data_parallel_replicate_degree,
      "DDP replicas (with a shard degree > 1: HSDP)");
    v("data_parallel_shard_degree", data_parallel_shard_degree,
      "FSDP shards; -1: whatever is left of the world size");
    v("tensor_parallel_degree", tensor_parallel_degree, "tensor-parallel degree");
    v("pipeline_parallel_degree", pipeline_parallel_degree,
      "pipeline-parallel degree: ranks the layers are split over, in stages (docs/distributed.md)");
    v("pipeline_parallel_schedule", pipeline_parallel_schedule,
      "the pipeline's order of forwards and backwards: GPipe, 1F1B (one stage per rank), "
      "Interleaved1F1B, InterleavedZeroBubble or ZBVZeroBubble (several stages per rank)");
    v("pipeline_parallel_microbatch_size", pipeline_parallel_microbatch_size,
      "rows of a pipeline microbatch; training.local_batch_size is split into microbatches of it");
    v("pipeline_parallel_layers_per_stage", pipeline_parallel_layers_per_stage,
      "layers of each stage, which sets the number of stages; -1: one stage per rank (two with "
      "the multi-stage schedules), the layers spread evenly");
    v("pipeline_parallel_first_stage_less_layers", pipeline_parallel_first_stage_less_layers,
      "the first stage holds this many layers fewer than the others (it holds the embedding)");
    v("pipeline_parallel_last_stage_less_layers", pipeline_parallel_last_stage_less_layers,
      "the last stage holds this many layers fewer than the others (it holds the norm and head)");
    v("context_parallel_degree", context_parallel_degree,
      "context-parallel degree: each rank holds 1/cp of every row's tokens");
    v("context_parallel_load_balancer", context_parallel_load_balancer,
      "how the sequence is split over the cp ranks: headtail (2 x cp chunks, rank i holds "
      "chunks i and 2cp-1-i) or none (cp contiguous pieces)");
    v("expert_parallel_degree", expert_parallel_degree,
      "expert-parallel degree (borrowed from shard x context x tensor)");
    v("fsdp_reshard_after_forward", fsdp_reshard_after_forward,
      "when FSDP frees a unit's gathered parameters after its forward: default (all but the last "
      "block and the head), always, never (faster, more memory)");
    v("enable_sequence_parallel", enable_sequence_parallel,
      "with tensor parallelism, split the norms and the residual stream over the sequence");
  }
};

struct OptimizerConfig {
  std::string name = "AdamW";
  double lr = 8e-4;
  std::vector<double> betas = {0.9, 0.95};
  double eps = 1e-8;
  double weight_decay = 0.1;
  std::string implementation = "fused";
  std::vector<std::string> param_groups = {};
  int64_t min_8bit_size = 4096;
  template <class V>
  void visit(V& v) {
    v("name", name,
      "the optimizer: AdamW, or AdamW8bit (bitsandbytes' 8-bit block-wise states, "
      "docs/optimizers.md)");
    v("lr", lr, "peak learning rate");
    v("betas", betas, "AdamW's two betas");
    v("eps", eps, "AdamW's epsilon");
    v("weight_decay", weight_decay, "decoupled weight decay");
    v("implementation", implementation,
      "fused (at::_fused_adamw_; AdamW8bit: the one-pass 8-bit kernel), foreach (AdamW only) or "
      "for-loop (AdamW8bit: bitsandbytes' sequence of ops)");
    v("param_groups", param_groups,
      "weight decay by parameter name, GLOB=WEIGHT_DECAY entries, first match wins; empty: the HF "
      "Trainer's rule (none on vectors such as norms)");
    v("min_8bit_size", min_8bit_size,
      "AdamW8bit: parameters with fewer elements (whole, not per rank) keep float32 states, as "
      "bitsandbytes' min_8bit_size");
  }
};

struct LRSchedulerConfig {
  int64_t warmup_steps = 2;
  int64_t total_steps = -1;
  double decay_ratio = -1.0;
  std::string decay_type = "linear";
  double min_lr_factor = 0.0;
  template <class V>
  void visit(V& v) {
    v("warmup_steps", warmup_steps,
      "steps of linear warmup (clipped to the total, with a warning)");
    v("total_steps", total_steps, "steps the schedule spans; -1: training.steps");
    v("decay_ratio", decay_ratio,
      "fraction of the steps spent decaying (warmup-stable-decay); -1: decay over every step after "
      "the warmup");
    v("decay_type", decay_type, "linear, sqrt or cosine");
    v("min_lr_factor", min_lr_factor, "the lr at the end, as a fraction of optimizer.lr");
  }
};

struct CheckpointConfig {
  bool enable = false;
  std::string folder = "checkpoint";
  int64_t interval = 500;
  std::string initial_load_path = "";
  bool initial_load_in_hf = false;
  bool initial_load_model_only = true;
  bool last_save_in_hf = false;
  bool last_save_model_only = true;
  std::string export_dtype = "float32";
  std::string hf_max_shard_size = "5GB";
  int64_t keep_latest_k = 10;
  std::string async_mode = "disabled";
  int64_t load_step = -1;
  std::vector<std::string> exclude_from_loading = {};
  template <class V>
  void visit(V& v) {
    v("enable", enable,
      "write training checkpoints every interval steps and at the last one, and resume from the "
      "newest");
    v("folder", folder, "folder of the training checkpoints, under job.dump_folder");
    v("interval", interval, "steps between training checkpoints");
    v("initial_load_path", initial_load_path,
      "weights to start from when there is nothing to resume: a Hugging Face folder (also the "
      "default of model.hf_assets_path) or a training checkpoint step-N");
    v("initial_load_in_hf", initial_load_in_hf,
      "the initial load is a Hugging Face folder (empty initial_load_path: model.hf_assets_path)");
    v("initial_load_model_only", initial_load_model_only,
      "from a training checkpoint, load the model only (not the optimizer, data position, ...)");
    v("last_save_in_hf", last_save_in_hf,
      "at the end, export a Hugging Face folder to job.dump_folder/hf/step-N");
    v("last_save_model_only", last_save_model_only, "the last save holds the model only");
    v("export_dtype", export_dtype,
      "dtype of the Hugging Face export: float32, bfloat16 or float16");
    v("hf_max_shard_size", hf_max_shard_size,
      "largest safetensors file of the export (e.g. 5GB); bigger models are sharded");
    v("keep_latest_k", keep_latest_k, "training checkpoints kept (0: all)");
    v("async_mode", async_mode,
      "disabled (save on the training thread) or async (in the background after a CPU copy)");
    v("load_step", load_step, "the step to resume from; -1: the newest complete checkpoint");
    v("exclude_from_loading", exclude_from_loading,
      "parts not restored on resume: model, optimizer, lr_scheduler, dataloader, train_state, rng");
  }
};

struct ActivationCheckpointConfig {
  std::string mode = "none";
  std::string selective_ac_option = "2";
  template <class V>
  void visit(V& v) {
    v("mode", mode, "recompute activations in backward: none, selective or full (every block)");
    v("selective_ac_option", selective_ac_option,
      "with mode selective: N recomputes every N-th block; op recomputes the cheap ops of every "
      "block");
  }
};

struct MetricsConfig {
  int64_t log_freq = 10;
  bool enable_tensorboard = false;
  std::string save_tb_folder = "tb";
  template <class V>
  void visit(V& v) {
    v("log_freq", log_freq,
      "steps between step lines (step 1 and the last step are always logged)");
    v("enable_tensorboard", enable_tensorboard,
      "also write the metrics as TensorBoard scalars (torchtitan's tags)");
    v("save_tb_folder", save_tb_folder, "TensorBoard folder, under job.dump_folder");
  }
};

// Kernel overrides (docs/kernels.md): which implementation each overridable op uses where.
struct OverrideConfig {
  std::vector<std::string> imports = {};
  std::vector<std::string> libraries = {};
  bool fallback = false;
  template <class V>
  void visit(V& v) {
    v("imports", imports,
      "kernel overrides, OP=IMPL or OP=IMPL@GLOB entries; call sites no entry claims use the op's "
      "default: reference, but fused for cross_entropy on the CPU and for nf4_linear (QLoRA) "
      "everywhere (the table at the end of titan configs --print; docs/kernels.md)");
    v("libraries", libraries,
      "shared libraries of kernels loaded at start-up (they register implementations)");
    v("fallback", fallback,
      "an implementation that does not support the device or dtype: false is an error, true uses "
      "reference there with a warning");
  }
};

// Traces of one step every profile_freq steps (torchtitan's profiling section).
struct ProfilingConfig {
  bool enable_profiling = false;
  std::string save_traces_folder = "profile_traces";
  int64_t profile_freq = 10;
  template <class V>
  void visit(V& v) {
    v("enable_profiling", enable_profiling,
      "trace one step every profile_freq steps with the libtorch profiler");
    v("save_traces_folder", save_traces_folder, "folder of the traces, under job.dump_folder");
    v("profile_freq", profile_freq, "steps between traced steps");
  }
};

struct CommConfig {
  int64_t init_timeout_seconds = 300;
  int64_t train_timeout_seconds = 100;
  template <class V>
  void visit(V& v) {
    v("init_timeout_seconds", init_timeout_seconds,
      "timeout of the collectives up to the end of the first step");
    v("train_timeout_seconds", train_timeout_seconds,
      "timeout of the collectives after the first step");
  }
};

struct DebugConfig {
  bool print_config = false;
  int64_t checkpoint_write_delay_ms = 0;
  int64_t inject_nonfinite_at_step = -1;
  int64_t step_delay_ms = 0;
  bool assume_cpu_without_bf16 = false;
  // Benchmark hook: false makes every data-parallel rank read (tokenize) every document itself,
  // as the loader did before shared reading (the batches are the same either way).
  bool shared_reading = true;
  template <class V>
  void visit(V& v) {
    v("print_config", print_config, "print the resolved config at start-up");
    v("checkpoint_write_delay_ms", checkpoint_write_delay_ms,
      "test hook: sleep this long per tensor written during a checkpoint save");
    v("inject_nonfinite_at_step", inject_nonfinite_at_step,
      "test hook: make the loss of this step NaN (-1: never)");
    v("step_delay_ms", step_delay_ms, "test hook: sleep this long after every step");
    v("assume_cpu_without_bf16", assume_cpu_without_bf16,
      "test hook: treat the CPU as one without bf16 instructions (for the warning about them)");
    v("shared_reading", shared_reading,
      "benchmark hook: false makes every data-parallel rank tokenize every document itself");
  }
};

struct TrainerConfig {
  JobConfig job;
  ModelConfig model;
  LoraConfig lora;
  TrainingConfig training;
  DpoConfig dpo;
  ParallelismConfig parallelism;
  OptimizerConfig optimizer;
  LRSchedulerConfig lr_scheduler;
  CheckpointConfig checkpoint;
  ActivationCheckpointConfig activation_checkpoint;
  MetricsConfig metrics;
  ValidatorConfig validator;
  ProfilingConfig profiling;
  OverrideConfig overrides;  // section "override"
  CommConfig comm;
  DebugConfig debug;

  // Calls s(section_name, section) for every section, in printing order.
  template <class S>
  void visit_sections(S& s) {
    s("job", job);
    s("model", model);
    s("lora", lora);
    s("training", training);
    s("dpo", dpo);
    s("parallelism", parallelism);
    s("optimizer", optimizer);
    s("lr_scheduler", lr_scheduler);
    s("checkpoint", checkpoint);
    s("activation_checkpoint", activation_checkpoint);
    s("metrics", metrics);
    s("validator", validator);
    s("profiling", profiling);
    s("override", overrides);
    s("comm", comm);
    s("debug", debug);
  }
};

}  // namespace titan::config
