#include "titan/config/torchtitan_keys.h"

#include <algorithm>
#include <vector>

namespace titan::config {
namespace {

using Action = TorchtitanKey::Action;

// One key (or, ending in ".*", every key under a prefix) of torchtitan's JobConfig (0.1, 0.2)
// that titan's tree lacks.
struct Rule {
  const char* key;
  // kRename: the titan field; otherwise empty.
  const char* titan_key;
  // The values (command-line form) that ask nothing titan lacks; empty: any value does.
  std::vector<const char*> inert;
  const char* note;     // why an inert value changes nothing
  const char* refusal;  // what titan lacks, for any other value
  // kRename: torchtitan's values -> titan's, where they are spelled otherwise; a value not
  // listed is refused with `refusal`.
  std::vector<std::pair<const char*, const char*>> values = {};
};

constexpr const char* kFloat8 =
    "configures torchtitan's float8/MX converters, which no model.converters entry names (titan "
    "has no float8 or MX training), so it has no effect";
constexpr const char* kMicrobatches =
    "titan cuts training.local_batch_size into microbatches of "
    "parallelism.pipeline_parallel_microbatch_size rows; this count is not read";
constexpr const char* kStageSplit =
    "titan places the stage boundaries by parallelism.pipeline_parallel_layers_per_stage and the "
    "first and last stage's fewer layers (pipeline_parallel_first_stage_less_layers, "
    "pipeline_parallel_last_stage_less_layers), not by module names";
constexpr const char* kDataloader =
    "a setting of torchtitan's worker processes; titan prepares batches in a thread "
    "(training.prefetch_batches)";

const std::vector<Rule>& rules() {
  static const std::vector<Rule> table = {
      // torchtitan 0.1 (2024) spellings, before the wildcards below: the batch, warmup and degrees
      // under [training], the
      // pipeline under [experimental], memory_estimation.enabled, validation.enabled.
      {"training.batch_size", "training.local_batch_size", {}, "", ""},
      {"training.warmup_steps", "lr_scheduler.warmup_steps", {}, "", ""},
      {"training.data_parallel_degree", "parallelism.data_parallel_shard_degree", {}, "", ""},
      {"training.data_parallel_shard_degree", "parallelism.data_parallel_shard_degree", {}, "", ""},
      {"training.data_parallel_replicate_degree",
       "parallelism.data_parallel_replicate_degree",
       {},
       "",
       ""},
      {"training.tensor_parallel_degree", "parallelism.tensor_parallel_degree", {}, "", ""},
      {"training.context_parallel_degree", "parallelism.context_parallel_degree", {}, "", ""},
      {"training.expert_parallel_degree", "parallelism.expert_parallel_degree", {}, "", ""},
      {"training.enable_loss_parallel",
       "",
       {"true"},
       "titan's loss is vocabulary-parallel under tensor parallelism",
       "titan's loss is always vocabulary-parallel under tensor parallelism"},
      {"training.fp8_linear", "", {"false"}, "no float8", "titan has no float8 training"},
      {"experimental.pipeline_parallel_degree", "parallelism.pipeline_parallel_degree", {}, "", ""},
      {"experimental.context_parallel_degree", "parallelism.context_parallel_degree", {}, "", ""},
      {"experimental.expert_parallel_degree", "parallelism.expert_parallel_degree", {}, "", ""},
      {"experimental.pipeline_parallel_schedule",
       "parallelism.pipeline_parallel_schedule",
       {},
       "",
       "titan's pipeline schedules are GPipe, 1F1B, Interleaved1F1B (and the others "
       "parallelism.pipeline_parallel_schedule lists)",
       {{"1f1b", "1F1B"},
        {"1F1B", "1F1B"},
        {"gpipe", "GPipe"},
        {"GPipe", "GPipe"},
        {"interleaved_1f1b", "Interleaved1F1B"},
        {"Interleaved1F1B", "Interleaved1F1B"}}},
      {"experimental.pipeline_parallel_split_points",
       "",
       {""},
       "empty: no split points",
       kStageSplit},
      {"experimental.pipeline_parallel_microbatches", "", {}, kMicrobatches, ""},
      {"experimental.enable_async_tensor_parallel",
       "",
       {"false"},
       "tensor parallelism is synchronous, as titan's is",
       "titan has no asynchronous tensor parallelism"},
      {"experimental.enable_compiled_autograd",
       "",
       {"false"},
       "nothing is compiled",
       "titan has no compiled autograd"},
      {"memory_estimation.enabled",
       "",
       {"false"},
       "no memory estimation run",
       "titan has no memory estimation run (titan train logs what each rank holds)"},
      {"validation.enabled", "validator.enable", {}, "", ""},
      {"metrics.enable_color_printing", "", {}, "titan prints no colors", ""},
      {"model.norm_type",
       "",
       {"rmsnorm", "fused_rmsnorm"},
       "titan's models use RMSNorm (a fused kernel comes through override.imports)",
       "titan's models use RMSNorm only"},
      {"optimizer.fused",
       "",
       {},
       "titan's AdamW is fused unless optimizer.implementation says otherwise",
       ""},
      {"checkpoint.interval_type",
       "",
       {"steps", "step"},
       "checkpoint.interval counts steps",
       "titan's checkpoint.interval counts steps only"},
      {"float8.enable_float8_linear", "", {"false"}, "no float8", "titan has no float8 training"},
      // torchtitan 0.3.0's Trainer.Config: top-level paths, [dataloader] and [profiler]
      {"hf_assets_path", "model.hf_assets_path", {}, "", ""},
      {"dump_folder", "job.dump_folder", {}, "", ""},
      {"dataloader.dataset", "training.dataset", {}, "", ""},
      {"dataloader.dataset_path", "training.dataset_path", {}, "", ""},
      {"dataloader.infinite",
       "",
       {"true"},
       "titan's loader starts the data over when it ends",
       "titan's loader always starts the data over when it ends (torchtitan's infinite = true)"},
      {"dataloader.*", "", {}, kDataloader, ""},
      {"profiler.enable_profiling", "profiling.enable_profiling", {}, "", ""},
      {"profiler.save_traces_folder", "profiling.save_traces_folder", {}, "", ""},
      {"profiler.profile_freq", "profiling.profile_freq", {}, "", ""},
      {"profiler.enable_memory_snapshot",
       "",
       {"false"},
       "memory snapshots stay off",
       "titan has no CUDA memory snapshots (metrics.jsonl logs peak memory every step)"},
      {"profiler.*", "", {}, "titan traces one whole step every profile_freq", ""},
      // A PEFT habit: LoRA switched on in its own section.
      {"lora.enable",
       "",
       {"false"},
       "LoRA is on when model.converters names lora, not here",
       "titan turns LoRA on as torchtitan does, with its model converters: give "
       "--model.converters lora (lora.* then sets rank, alpha, targets, ...)"},
      // [job]
      {"job.print_config", "debug.print_config", {}, "", ""},
      {"job.print_args", "debug.print_config", {}, "", ""},
      {"job.use_for_integration_test", "", {}, "a flag of torchtitan's own test runner", ""},
      {"job.save_config_file",
       "",
       {""},
       "titan writes the resolved config to "
       "job.dump_folder/config.toml anyway",
       "titan writes the resolved config to "
       "job.dump_folder/config.toml only"},
      {"job.custom_config_module",
       "",
       {""},
       "no custom config module",
       "titan's config functions are C++ (titan configs lists them); it loads no Python module"},
      // [profiling]
      {"profiling.enable_memory_snapshot",
       "",
       {"false"},
       "memory snapshots stay off",
       "titan has no CUDA memory snapshots (metrics.jsonl logs peak memory every step)"},
      {"profiling.save_memory_snapshot_folder", "", {}, "memory snapshots are off", ""},
      {"profiling.profiler_active", "", {}, "titan traces one whole step every profile_freq", ""},
      {"profiling.profiler_warmup", "", {}, "titan traces one whole step every profile_freq", ""},
      // [metrics]
      {"metrics.enable_wandb",
       "",
       {"false"},
       "Weights & Biases logging stays off",
       "titan has no Weights & Biases logging; it writes metrics.jsonl and, with "
       "metrics.enable_tensorboard, TensorBoard scalars under torchtitan's tags"},
      {"metrics.disable_color_printing", "", {}, "titan prints no colors", ""},
      {"metrics.save_for_all_ranks",
       "",
       {"false"},
       "rank 0 logs, as titan does",
       "titan logs the metrics of rank 0 only (they are already reduced over the ranks)"},
      {"metrics.rank_0_only",
       "",
       {"true"},
       "rank 0 logs, as titan does",
       "titan logs the metrics of rank 0 only (they are already reduced over the ranks)"},
      // [model]
      {"model.tokenizer_path",
       "",
       {""},
       "no tokenizer file",
       "titan reads the tokenizer from model.hf_assets_path, a folder with tokenizer.json and "
       "tokenizer_config.json (torchtitan's scripts/download_hf_assets.py writes one)"},
      {"model.print_after_conversion", "", {}, "titan logs what each converter did", ""},
      // [optimizer]
      {"optimizer.beta1", "optimizer.betas", {}, "", ""},
      {"optimizer.beta2", "optimizer.betas", {}, "", ""},
      {"optimizer.early_step_in_backward",
       "",
       {"false"},
       "the optimizer steps after backward",
       "titan has no optimizer step in backward"},
      // [lr_scheduler]
      {"lr_scheduler.lr_min", "lr_scheduler.min_lr_factor", {}, "", ""},
      // [training]
      {"training.compile",
       "",
       {"false"},
       "nothing is compiled",
       "titan has no torch.compile: its model is C++ (fused kernels come through "
       "override.imports)"},
      {"training.enable_cpu_offload",
       "",
       {"false"},
       "nothing is offloaded",
       "titan has no CPU offload of parameters; to fit a larger model, --optimizer.name "
       "AdamW8bit keeps the optimizer's moments in 8-bit blocks (docs/optimizers.md), or train "
       "LoRA / QLoRA adapters"},
      {"training.gc_freq", "", {}, "titan has no Python garbage collector to schedule", ""},
      {"training.gc_debug", "", {}, "titan has no Python garbage collector to schedule", ""},
      {"training.dataloader.*", "", {}, kDataloader, ""},
      // [parallelism]
      {"parallelism.enable_async_tensor_parallel",
       "",
       {"false"},
       "tensor parallelism is "
       "synchronous, as titan's is",
       "titan has no asynchronous tensor parallelism"},
      {"parallelism.disable_loss_parallel",
       "",
       {"false"},
       "titan's loss is vocabulary-parallel "
       "under tensor parallelism",
       "titan's loss is always vocabulary-parallel under tensor "
       "parallelism"},
      {"parallelism.enable_compiled_autograd",
       "",
       {"false"},
       "nothing is compiled",
       "titan has no compiled autograd"},
      // titan's own pipeline and context-parallel fields (pipeline_parallel_schedule,
      // _microbatch_size, _layers_per_stage, _first/_last_stage_less_layers,
      // context_parallel_load_balancer) are read as they are; these are torchtitan's others.
      {"parallelism.pipeline_parallel_schedule_csv",
       "",
       {""},
       "empty: no schedule file",
       "titan has no schedule read from a CSV file; it runs pipeline_parallel_schedule's"},
      {"parallelism.pipeline_parallel_microbatches", "", {}, kMicrobatches, ""},
      {"parallelism.pipeline_parallel_split_points",
       "",
       {""},
       "empty: no split points",
       kStageSplit},
      {"parallelism.module_fqns_per_model_part", "", {""}, "empty: no module lists", kStageSplit},
      {"parallelism.pipeline_parallel_expert_parallel_overlap",
       "",
       {"false"},
       "nothing is overlapped",
       "titan does not overlap expert parallelism with the pipeline"},
      {"parallelism.context_parallel_rotate_method",
       "",
       {"allgather"},
       "titan's context parallelism all-gathers keys and values",
       "titan's context parallelism all-gathers keys and values (allgather); it has no other "
       "rotate method"},
      {"parallelism.expert_tensor_parallel_degree",
       "",
       {"1"},
       "experts are not split by tensor "
       "parallelism, as titan's are not",
       "titan has no expert tensor parallelism (experts are "
       "spread by expert_parallel_degree, each whole)"},
      {"parallelism.expert_parallel_comm_backend",
       "",
       {"standard"},
       "the standard all-to-all, "
       "as titan's",
       "titan's expert parallelism exchanges tokens with the standard all-to-all "
       "only (no DeepEP)"},
      // [checkpoint]
      {"checkpoint.enable_checkpoint", "checkpoint.enable", {}, "", ""},
      {"checkpoint.model_weights_only", "checkpoint.last_save_model_only", {}, "", ""},
      {"checkpoint.last_save_model_weights_only", "checkpoint.last_save_model_only", {}, "", ""},
      {"checkpoint.enable_ft_dataloader_checkpoints",
       "",
       {},
       "a torchft setting; titan has no "
       "torchft",
       ""},
      {"checkpoint.initial_load_in_hf_quantized",
       "",
       {"false"},
       "the initial load is not "
       "quantized",
       "titan loads no quantized Hugging Face checkpoint (lora.base_quantization "
       "nf4 quantises a full-precision one)"},
      {"checkpoint.enable_first_step_checkpoint",
       "",
       {"false"},
       "no checkpoint before step 1",
       "titan writes no checkpoint before the first step"},
      {"checkpoint.create_seed_checkpoint",
       "",
       {"false"},
       "no seed checkpoint",
       "titan has no seed checkpoint: every rank initialises the same weights from "
       "training.seed"},
      {"checkpoint.load_only",
       "",
       {"false"},
       "checkpoints are saved as well as loaded",
       "titan has no load-only mode (checkpoint.enable false only loads an initial_load_path)"},
      // [activation_checkpoint]
      {"activation_checkpoint.per_op_sac_force_recompute_mm_shapes_by_fqns",
       "",
       {},
       "titan's selective recomputation policy is fixed",
       ""},
      {"activation_checkpoint.early_stop", "", {}, "titan recomputes each block whole", ""},
      {"activation_checkpoint.memory_budget",
       "",
       {},
       "applies only with mode memory_budget, "
       "which titan does not have",
       ""},
      {"activation_checkpoint.visualize_memory_budget_pareto",
       "",
       {},
       "applies only with mode "
       "memory_budget, which titan does not have",
       ""},
      {"activation_checkpoint.preserve_rng_state",
       "",
       {},
       "titan's recomputation draws no "
       "random numbers",
       ""},
      {"activation_checkpoint.determinism_check",
       "",
       {},
       "titan's recomputation draws no "
       "random numbers",
       ""},
      {"activation_checkpoint.debug", "", {}, "a debugging switch of torch's checkpointing", ""},
      // [compile]
      {"compile.enable",
       "",
       {"false"},
       "nothing is compiled (titan's model is C++)",
       "titan has no torch.compile: its model is C++ (fused kernels come through "
       "override.imports)"},
      {"compile.components", "", {}, "torch.compile is off", ""},
      {"compile.backend", "", {}, "torch.compile is off", ""},
      {"compile.model_backend_override", "", {}, "torch.compile is off", ""},
      // [quantize], [float8], [mx]
      {"quantize.*", "", {}, kFloat8, ""},
      {"float8.*", "", {}, kFloat8, ""},
      {"mx.*", "", {}, kFloat8, ""},
      // [comm]
      {"comm.trace_buf_size", "", {}, "a flight-recorder setting of torch's NCCL", ""},
      {"comm.save_traces_folder", "", {}, "a flight-recorder setting of torch's NCCL", ""},
      {"comm.save_traces_file_prefix", "", {}, "a flight-recorder setting of torch's NCCL", ""},
      {"comm.mode",
       "",
       {"default"},
       "real collectives",
       "titan has no fake or local-tensor "
       "communication modes"},
      // [memory_estimation], [fault_tolerance], [experimental]
      {"memory_estimation.enable",
       "",
       {"false"},
       "no memory estimation run",
       "titan has no memory estimation run (titan train logs what each rank holds)"},
      {"memory_estimation.disable_fake_mode", "", {}, "memory estimation is off", ""},
      {"fault_tolerance.enable",
       "",
       {"false"},
       "torchft stays off",
       "titan has no torchft "
       "fault tolerance (it checkpoints and resumes; docs/operations.md)"},
      {"fault_tolerance.*", "", {}, "torchft is off", ""},
      {"experimental.custom_import",
       "",
       {""},
       "no module to import",
       "titan imports no Python module; kernels come as shared libraries (override.libraries)"},
      {"experimental.custom_args_module",
       "",
       {""},
       "no module to import",
       "titan imports no Python module"},
      {"experimental.*", "", {}, "an experimental torchtitan setting with no effect here", ""},
      // [validation]: titan's [validator]
      {"validation.enable", "validator.enable", {}, "", ""},
      {"validation.freq", "validator.freq", {}, "", ""},
      {"validation.steps", "validator.steps", {}, "", ""},
      {"validation.dataset_path", "validator.dataset_path", {}, "", ""},
      {"validation.dataset",
       "",
       {},
       "titan validates on validation.dataset_path (a local file); "
       "it downloads no dataset",
       ""},
      {"validation.local_batch_size",
       "",
       {},
       "titan validates with training.local_batch_size "
       "and training.seq_len",
       ""},
      {"validation.seq_len",
       "",
       {},
       "titan validates with training.local_batch_size and "
       "training.seq_len",
       ""},
      {"validation.dataloader.*", "", {}, kDataloader, ""},
      // [debug]: titan has the section, with other keys
      {"debug.seed", "training.seed", {}, "", ""},
      {"debug.deterministic", "training.deterministic", {}, "", ""},
      {"debug.deterministic_warn_only",
       "",
       {},
       "titan's deterministic mode has no warn-only "
       "variant; it applies only with training.deterministic",
       ""},
      {"debug.moe_force_load_balance",
       "",
       {"false"},
       "routing is the model's own",
       "titan has no forced MoE load balancing (model.moe_load_balancing chooses aux_loss or "
       "expert_bias)"},
  };
  return table;
}

bool matches(const std::string& pattern, const std::string& key) {
  if (pattern.size() >= 2 && pattern.compare(pattern.size() - 2, 2, ".*") == 0)
    return key.compare(0, pattern.size() - 1, pattern, 0, pattern.size() - 1) == 0;
  return key == pattern;
}

}  // namespace

std::optional<TorchtitanKey> torchtitan_key(const std::string& key, const std::string& value) {
  for (const Rule& rule : rules()) {
    if (!matches(rule.key, key)) continue;
    TorchtitanKey out;
    if (*rule.titan_key != '\0') {
      out.action = Action::kRename;
      out.titan_key = rule.titan_key;
      out.message = std::string("torchtitan's name for ") + rule.titan_key;
      if (!rule.values.empty()) {
        auto v = std::find_if(rule.values.begin(), rule.values.end(),
                              [&](const auto& pair) { return value == pair.first; });
        if (v == rule.values.end()) {
          out.action = Action::kRefuse;
          out.message = rule.refusal;
          return out;
        }
        out.value = v->second;
      }
      // torchtitan's two betas are titan's one list.
      if (key == "optimizer.beta1") out.index = 0;
      if (key == "optimizer.beta2") out.index = 1;
      // Appended piece by piece: GCC 12 warns falsely (-Wstringop-overflow) on "[" + string.
      if (out.index >= 0) out.message.append("[").append(std::to_string(out.index)).append("]");
      return out;
    }
    const bool inert = rule.inert.empty() || std::any_of(rule.inert.begin(), rule.inert.end(),
                                                         [&](const char* v) { return value == v; });
    out.action = inert ? Action::kNote : Action::kRefuse;
    out.message = inert ? rule.note : rule.refusal;
    return out;
  }
  return std::nullopt;
}

std::vector<std::string> torchtitan_section_keys(const std::string& section) {
  std::vector<std::string> keys;
  const std::string prefix = section + ".";
  for (const Rule& rule : rules()) {
    const std::string key = rule.key;
    if (key.rfind(prefix, 0) == 0) keys.push_back(key.substr(prefix.size()));
  }
  return keys;
}

bool is_torchtitan_section(const std::string& section) {
  static const std::vector<std::string> sections = {
      "compile",           "quantize",     "float8",          "mx",
      "memory_estimation", "experimental", "fault_tolerance", "validation"};
  return std::find(sections.begin(), sections.end(), section) != sections.end();
}

bool is_torchtitan_dataset(const std::string& name) {
  return name == "c4" || name == "c4_test" || name == "c4_validation";
}

}  // namespace titan::config
