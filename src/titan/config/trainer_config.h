// The configuration tree: plain structs with torchtitan's section and field names.
//
// Each section lists its fields once, in visit(); the TOML overlay, the CLI overrides,
// printing and unknown-key errors are all generic code over that list (config_fields.h),
// so a new field is added here and nowhere else. Value checks live in validate.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace titan::config {

struct JobConfig {
  std::string dump_folder = "./outputs";
  std::string description = "titan-cpp training job";
  template <class V>
  void visit(V& v) {
    v("dump_folder", dump_folder);
    v("description", description);
  }
};

struct ModelConfig {
  // Which ModelSpec builds the model: "qwen3" (native C++) or "transformers" (Hugging Face
  // Transformers' own model, docs/transformers_backend.md).
  std::string name = "qwen3";
  // A named flavor ("debugmodel", "0.6B", "30B-A3B", ...) or "auto" = every dimension from
  // hf_assets_path/config.json.
  std::string flavor = "debugmodel";
  // Folder with config.json (when present) and the tokenizer files.
  std::string hf_assets_path = "assets/qwen3-tokenizer";
  // Hub id the weights came from (informational for qwen3); for transformers the model: a
  // Hugging Face directory, an id whose files are in hf_assets_path, or a model type.
  std::string hf_model = "";
  // MoE load balancing: "none", "aux_loss" (HF's Switch-style auxiliary loss, scaled by
  // router_aux_loss_coef) or "expert_bias" (torchtitan's aux-loss-free bias update).
  std::string moe_load_balancing = "none";
  double router_aux_loss_coef = 0.001;
  double expert_bias_update_rate = 0.001;
  // model.name transformers only (docs/transformers_backend.md): config fields to change,
  // "FIELD=VALUE" with JSON values (e.g. "num_hidden_layers=2"; not applied with flavor auto,
  // which takes hf_assets_path/config.json as it is), and the implementations Transformers runs
  // ("" = its default).
  std::vector<std::string> hf_config_overrides = {};
  std::string attn_implementation = "sdpa";  // sdpa | eager | ...
  std::string experts_implementation = "";   // grouped_mm | eager | ...
  template <class V>
  void visit(V& v) {
    v("name", name);
    v("flavor", flavor);
    v("hf_assets_path", hf_assets_path);
    v("hf_model", hf_model);
    v("moe_load_balancing", moe_load_balancing);
    v("router_aux_loss_coef", router_aux_loss_coef);
    v("expert_bias_update_rate", expert_bias_update_rate);
    v("hf_config_overrides", hf_config_overrides);
    v("attn_implementation", attn_implementation);
    v("experts_implementation", experts_implementation);
  }
};

struct TrainingConfig {
  int64_t steps = 20;
  int64_t local_batch_size = 8;
  // -1: local_batch_size x data-parallel degree (no gradient accumulation).
  int64_t global_batch_size = -1;
  int64_t seq_len = 256;
  double max_norm = 1.0;
  // dtype of the parameters the optimizer updates: float32 | bfloat16.
  std::string dtype = "float32";
  // dtype forward/backward compute in: auto (bfloat16 on CUDA, float32 on the CPU) |
  // float32 | bfloat16.
  std::string mixed_precision_param = "auto";
  std::string mixed_precision_reduce = "float32";
  // Dataset name, informational when dataset_path is set.
  std::string dataset = "python_stdlib";
  // A dataset file, folder or glob (data/document_source.h: jsonl, Parquet, Arrow, text).
  std::string dataset_path = "assets/corpus/python_stdlib.jsonl";
  // The jsonl field, or the Parquet/Arrow string column, that holds each document's text.
  std::string dataset_text_field = "text";
  // Token placed between packed documents.
  std::string eos_token = "<|endoftext|>";
  // Block-causal attention over packed rows: each document attends to itself only, positions
  // restart at 0 where a document starts, and the label crossing into the next document is
  // ignored. false: plain causal attention across the packed row.
  bool document_masking = false;
  // Visit the documents in a new order every epoch, drawn from `seed` (false: file order).
  bool shuffle = false;
  // Supervised fine-tuning: dataset records are conversations ({"messages": [...], "tools"}),
  // rendered with the chat template of model.hf_assets_path; only assistant turns are trained.
  bool sft = false;
  // Batches a background thread reads, tokenizes and packs ahead of the step (0: none).
  int64_t prefetch_batches = 2;
  int64_t seed = 0;
  bool deterministic = false;
  // "cpu", "cuda" or "auto" (cuda when available).
  std::string device = "auto";
  // A step whose loss or gradient norm is not finite: false = stop with an error naming the
  // step; true = skip its update (the weights stay as they were) and count it.
  bool skip_nonfinite_steps = false;
  template <class V>
  void visit(V& v) {
    v("steps", steps);
    v("local_batch_size", local_batch_size);
    v("global_batch_size", global_batch_size);
    v("seq_len", seq_len);
    v("max_norm", max_norm);
    v("dtype", dtype);
    v("mixed_precision_param", mixed_precision_param);
    v("mixed_precision_reduce", mixed_precision_reduce);
    v("dataset", dataset);
    v("dataset_path", dataset_path);
    v("dataset_text_field", dataset_text_field);
    v("eos_token", eos_token);
    v("document_masking", document_masking);
    v("shuffle", shuffle);
    v("sft", sft);
    v("prefetch_batches", prefetch_batches);
    v("seed", seed);
    v("deterministic", deterministic);
    v("device", device);
    v("skip_nonfinite_steps", skip_nonfinite_steps);
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
    v("enable", enable);
    v("freq", freq);
    v("steps", steps);
    v("dataset_path", dataset_path);
  }
};

struct ParallelismConfig {
  int64_t data_parallel_replicate_degree = 1;
  // -1: whatever is left of the world size.
  int64_t data_parallel_shard_degree = -1;
  int64_t tensor_parallel_degree = 1;
  int64_t pipeline_parallel_degree = 1;
  int64_t context_parallel_degree = 1;
  int64_t expert_parallel_degree = 1;
  // When FSDP frees a unit's all-gathered parameters after its forward: "default" (every unit
  // but the last block and the head, whose backward comes right after), "always", "never"
  // (keep them until backward: faster, more memory).
  std::string fsdp_reshard_after_forward = "default";
  template <class V>
  void visit(V& v) {
    v("data_parallel_replicate_degree", data_parallel_replicate_degree);
    v("data_parallel_shard_degree", data_parallel_shard_degree);
    v("tensor_parallel_degree", tensor_parallel_degree);
    v("pipeline_parallel_degree", pipeline_parallel_degree);
    v("context_parallel_degree", context_parallel_degree);
    v("expert_parallel_degree", expert_parallel_degree);
    v("fsdp_reshard_after_forward", fsdp_reshard_after_forward);
  }
};

struct OptimizerConfig {
  std::string name = "AdamW";
  double lr = 8e-4;
  std::vector<double> betas = {0.9, 0.95};
  double eps = 1e-8;
  double weight_decay = 0.1;
  // fused (at::_fused_adamw_) | foreach | for-loop.
  std::string implementation = "fused";
  // Parameter groups by name: "GLOB=WEIGHT_DECAY" entries, first match wins. Empty: the HF
  // Trainer's rule (weight_decay on matrices, none on vectors such as norms). ["*=0.1"] is
  // torchtitan's single catch-all group.
  std::vector<std::string> param_groups = {};
  template <class V>
  void visit(V& v) {
    v("name", name);
    v("lr", lr);
    v("betas", betas);
    v("eps", eps);
    v("weight_decay", weight_decay);
    v("implementation", implementation);
    v("param_groups", param_groups);
  }
};

struct LRSchedulerConfig {
  int64_t warmup_steps = 2;
  // -1: training.steps.
  int64_t total_steps = -1;
  // Fraction of the steps spent decaying (warmup-stable-decay); -1: decay over every step
  // after the warmup.
  double decay_ratio = -1.0;
  std::string decay_type = "linear";  // linear | sqrt | cosine
  double min_lr_factor = 0.0;
  template <class V>
  void visit(V& v) {
    v("warmup_steps", warmup_steps);
    v("total_steps", total_steps);
    v("decay_ratio", decay_ratio);
    v("decay_type", decay_type);
    v("min_lr_factor", min_lr_factor);
  }
};

struct CheckpointConfig {
  bool enable = false;
  std::string folder = "checkpoint";  // relative to job.dump_folder
  int64_t interval = 500;
  std::string initial_load_path = "";
  bool initial_load_in_hf = false;
  bool initial_load_model_only = true;
  bool last_save_in_hf = false;
  bool last_save_model_only = true;
  std::string export_dtype = "float32";  // float32 | bfloat16 | float16
  std::string hf_max_shard_size = "5GB";
  int64_t keep_latest_k = 10;
  std::string async_mode = "disabled";  // disabled | async
  int64_t load_step = -1;
  std::vector<std::string> exclude_from_loading = {};
  template <class V>
  void visit(V& v) {
    v("enable", enable);
    v("folder", folder);
    v("interval", interval);
    v("initial_load_path", initial_load_path);
    v("initial_load_in_hf", initial_load_in_hf);
    v("initial_load_model_only", initial_load_model_only);
    v("last_save_in_hf", last_save_in_hf);
    v("last_save_model_only", last_save_model_only);
    v("export_dtype", export_dtype);
    v("hf_max_shard_size", hf_max_shard_size);
    v("keep_latest_k", keep_latest_k);
    v("async_mode", async_mode);
    v("load_step", load_step);
    v("exclude_from_loading", exclude_from_loading);
  }
};

struct ActivationCheckpointConfig {
  // none | selective | full (every block recomputed in backward).
  std::string mode = "none";
  // With mode selective: an integer N recomputes every N-th block (torchtitan's count: blocks
  // N-1, 2N-1, ...); "op" recomputes the cheap ops of every block (norms, rotary embedding)
  // and keeps the matmul and attention outputs.
  std::string selective_ac_option = "2";
  template <class V>
  void visit(V& v) {
    v("mode", mode);
    v("selective_ac_option", selective_ac_option);
  }
};

struct MetricsConfig {
  int64_t log_freq = 10;
  bool enable_tensorboard = false;
  std::string save_tb_folder = "tb";
  template <class V>
  void visit(V& v) {
    v("log_freq", log_freq);
    v("enable_tensorboard", enable_tensorboard);
    v("save_tb_folder", save_tb_folder);
  }
};

// Kernel overrides (docs/kernels.md): which implementation each overridable op uses where.
struct OverrideConfig {
  // "OP=IMPL" or "OP=IMPL@GLOB" entries, e.g. "moe_experts=fused@layers.*.moe"; call sites no
  // entry claims use "reference". Ops: rms_norm, rope, attention, swiglu, moe_router,
  // moe_experts, cross_entropy.
  std::vector<std::string> imports = {};
  // Shared libraries of kernels loaded at start-up (they register implementations).
  std::vector<std::string> libraries = {};
  // An implementation that does not support the run's device or dtype: false = an error,
  // true = use reference there, with a warning.
  bool fallback = false;
  template <class V>
  void visit(V& v) {
    v("imports", imports);
    v("libraries", libraries);
    v("fallback", fallback);
  }
};

// Traces of one step every profile_freq steps (torchtitan's profiling section).
struct ProfilingConfig {
  bool enable_profiling = false;
  std::string save_traces_folder = "profile_traces";  // relative to job.dump_folder
  int64_t profile_freq = 10;
  template <class V>
  void visit(V& v) {
    v("enable_profiling", enable_profiling);
    v("save_traces_folder", save_traces_folder);
    v("profile_freq", profile_freq);
  }
};

struct CommConfig {
  int64_t init_timeout_seconds = 300;
  int64_t train_timeout_seconds = 100;
  template <class V>
  void visit(V& v) {
    v("init_timeout_seconds", init_timeout_seconds);
    v("train_timeout_seconds", train_timeout_seconds);
  }
};

struct DebugConfig {
  bool print_config = false;
  // Test hook: sleep this long per tensor written during a checkpoint save.
  int64_t checkpoint_write_delay_ms = 0;
  // Test hook: the loss of this step is made NaN (-1: never).
  int64_t inject_nonfinite_at_step = -1;
  // Test hook: sleep this long after every step (to signal a run at a known point).
  int64_t step_delay_ms = 0;
  // Benchmark hook: false makes every data-parallel rank read (tokenize) every document itself,
  // as the loader did before shared reading (the batches are the same either way).
  bool shared_reading = true;
  template <class V>
  void visit(V& v) {
    v("print_config", print_config);
    v("checkpoint_write_delay_ms", checkpoint_write_delay_ms);
    v("inject_nonfinite_at_step", inject_nonfinite_at_step);
    v("step_delay_ms", step_delay_ms);
    v("shared_reading", shared_reading);
  }
};

struct TrainerConfig {
  JobConfig job;
  ModelConfig model;
  TrainingConfig training;
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
    s("training", training);
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
