#include "titan/config/validate.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>
#include <vector>

#include "titan/common/did_you_mean.h"
#include "titan/common/error.h"
#include "titan/common/strings.h"
#include "titan/config/field_values.h"

namespace titan::config {
namespace {

template <class T>
void check_range(bool ok, const char* key, const T& value, const char* requirement) {
  if (!ok) fail(key, " = ", format_toml_value(value), ": must be ", requirement);
}

void check_at_least(const char* key, int64_t value, int64_t minimum) {
  check_range(value >= minimum, key, value, (">= " + std::to_string(minimum)).c_str());
}

// A degree is >= 1; the shard degree may also be -1 (what is left of the world size).
void check_degree(const char* key, int64_t value, bool allow_minus_one) {
  if (value >= 1 || (allow_minus_one && value == -1)) return;
  fail(key, " = ", value, ": must be >= 1",
       allow_minus_one ? " or -1 (use the remaining ranks)" : "");
}

void check_degrees(const ParallelismConfig& p) {
  check_degree("parallelism.data_parallel_replicate_degree", p.data_parallel_replicate_degree,
               false);
  check_degree("parallelism.data_parallel_shard_degree", p.data_parallel_shard_degree, true);
  check_degree("parallelism.tensor_parallel_degree", p.tensor_parallel_degree, false);
  check_degree("parallelism.pipeline_parallel_degree", p.pipeline_parallel_degree, false);
  check_degree("parallelism.context_parallel_degree", p.context_parallel_degree, false);
  check_degree("parallelism.expert_parallel_degree", p.expert_parallel_degree, false);
}

std::string describe_degrees(const ParallelismConfig& p) {
  return "data_parallel_replicate_degree=" + std::to_string(p.data_parallel_replicate_degree) +
         ", data_parallel_shard_degree=" + std::to_string(p.data_parallel_shard_degree) +
         ", context_parallel_degree=" + std::to_string(p.context_parallel_degree) +
         ", tensor_parallel_degree=" + std::to_string(p.tensor_parallel_degree) +
         ", pipeline_parallel_degree=" + std::to_string(p.pipeline_parallel_degree) +
         ", expert_parallel_degree=" + std::to_string(p.expert_parallel_degree) +
         " (expert parallelism borrows its ranks from data_parallel_shard_degree x "
         "context_parallel_degree x tensor_parallel_degree)";
}

std::string to_lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The pipeline's schedule (by torchtitan's names, in any case), its stage split and its
// microbatches; the split over the model's layers is checked when the model is built.
void check_pipeline(const ParallelismConfig& p, const TrainingConfig& t) {
  check_pipeline_schedule(p.pipeline_parallel_schedule);
  check_at_least("parallelism.pipeline_parallel_microbatch_size",
                 p.pipeline_parallel_microbatch_size, 1);
  check_range(
      p.pipeline_parallel_layers_per_stage == -1 || p.pipeline_parallel_layers_per_stage >= 1,
      "parallelism.pipeline_parallel_layers_per_stage", p.pipeline_parallel_layers_per_stage,
      ">= 1 or -1 (one stage per rank, two with the multi-stage schedules)");
  check_at_least("parallelism.pipeline_parallel_first_stage_less_layers",
                 p.pipeline_parallel_first_stage_less_layers, 0);
  check_at_least("parallelism.pipeline_parallel_last_stage_less_layers",
                 p.pipeline_parallel_last_stage_less_layers, 0);
  if (p.pipeline_parallel_degree > 1 &&
      t.local_batch_size % p.pipeline_parallel_microbatch_size != 0)
    fail("training.local_batch_size = ", t.local_batch_size,
         " does not divide into pipeline microbatches of "
         "parallelism.pipeline_parallel_microbatch_size = ",
         p.pipeline_parallel_microbatch_size, " rows");
}

void check_activation_checkpoint(const ActivationCheckpointConfig& ac) {
  check_one_of("activation_checkpoint.mode", ac.mode, {"none", "selective", "full"});
  if (ac.mode == "selective") selective_ac_frequency(ac.selective_ac_option);
}

// training.objective and the dpo section (docs/preference.md).
void check_objective(const TrainerConfig& c) {
  check_one_of("training.objective", c.training.objective, {"lm", "dpo"});
  const DpoConfig& d = c.dpo;
  check_range(std::isfinite(d.beta) && d.beta > 0, "dpo.beta", d.beta, "> 0");
  TITAN_CHECK(!d.loss_type.empty(), "dpo.loss_type is empty: name a loss, e.g. sigmoid");
  for (const std::string& loss : d.loss_type) check_one_of("dpo.loss_type", loss, dpo_loss_names());
  check_range(
      d.loss_weights.empty() || d.loss_weights.size() == d.loss_type.size(), "dpo.loss_weights",
      d.loss_weights,
      ("empty or one weight per dpo.loss_type entry (" + std::to_string(d.loss_type.size()) + ")")
          .c_str());
  for (const double w : d.loss_weights)
    check_range(std::isfinite(w), "dpo.loss_weights", d.loss_weights, "finite numbers");
  check_range(d.label_smoothing >= 0 && d.label_smoothing < 0.5, "dpo.label_smoothing",
              d.label_smoothing, "in [0, 0.5)");
  const bool exo =
      std::find(d.loss_type.begin(), d.loss_type.end(), "exo_pair") != d.loss_type.end();
  check_range(!exo || d.label_smoothing > 0, "dpo.label_smoothing", d.label_smoothing,
              "> 0 with the exo_pair loss (it takes the log of it)");
  check_one_of("dpo.reference", d.reference, {"initial", "adapters_off"});
  check_range(d.max_length == -1 || d.max_length >= 2, "dpo.max_length", d.max_length,
              ">= 2 or -1 (no limit)");
  check_one_of("dpo.truncation_mode", d.truncation_mode, {"keep_start", "keep_end"});
  if (c.training.objective != "dpo") return;
  TITAN_CHECK(!c.training.sft,
              "training.sft = true and training.objective = \"dpo\" do not go together: DPO "
              "reads preference records ({\"prompt\", \"chosen\", \"rejected\"}), rendering "
              "conversations with the chat template itself; leave training.sft false");
  TITAN_CHECK(c.training.packing == "megatron" && !c.training.document_masking,
              "training.packing = \"", c.training.packing,
              "\" does not apply to training.objective = \"dpo\": its pairs are padded rows, "
              "never packed; leave training.packing and training.document_masking at their "
              "defaults");
  const bool lora = std::find(c.model.converters.begin(), c.model.converters.end(), "lora") !=
                    c.model.converters.end();
  TITAN_CHECK(c.parallelism.pipeline_parallel_degree <= 1,
              "parallelism.pipeline_parallel_degree = ", c.parallelism.pipeline_parallel_degree,
              ": training.objective = \"dpo\" does not run pipeline-parallel (a pair's "
              "log-probabilities need the reference's and the policy's forwards of whole rows); "
              "use data, tensor, context or expert parallelism");
  TITAN_CHECK(d.reference != "adapters_off" || lora,
              "dpo.reference = \"adapters_off\" needs LoRA (model.converters = [\"lora\"]): "
              "without adapters the reference is the starting weights, dpo.reference = "
              "\"initial\"");
}

}  // namespace

const std::vector<std::string>& dpo_loss_names() {
  static const std::vector<std::string> names = {
      "sigmoid",  "ipo",       "hinge",    "robust",   "sigmoid_norm", "bco_pair",
      "nca_pair", "sppo_hard", "apo_zero", "apo_down", "exo_pair",     "sft"};
  return names;
}

const std::vector<std::string>& pipeline_schedule_names() {
  static const std::vector<std::string> names = {"GPipe", "1F1B", "Interleaved1F1B",
                                                 "InterleavedZeroBubble", "ZBVZeroBubble"};
  return names;
}

void check_pipeline_schedule(const std::string& name) {
  std::vector<std::string> lower;
  for (const std::string& accepted : pipeline_schedule_names()) lower.push_back(to_lower(accepted));
  if (std::find(lower.begin(), lower.end(), to_lower(name)) != lower.end()) return;
  const std::string best = closest_name(to_lower(name), lower);
  std::string hint;
  for (const std::string& accepted : pipeline_schedule_names())
    if (to_lower(accepted) == best) hint = " (did you mean \"" + accepted + "\"?)";
  fail("parallelism.pipeline_parallel_schedule = \"", name, "\"", hint, ": accepted values are ",
       join(pipeline_schedule_names()));
}

void check_one_of(const std::string& key, const std::string& value,
                  const std::vector<std::string>& accepted) {
  if (std::find(accepted.begin(), accepted.end(), value) != accepted.end()) return;
  fail(key, " = \"", value, "\": accepted values are ", join(accepted));
}

ParamGroupEntry parse_param_group_entry(const std::string& entry) {
  // The glob itself may contain '=' only inside brackets, which is unusual enough that the last
  // '=' separates the value.
  const size_t eq = entry.rfind('=');
  TITAN_CHECK(eq != std::string::npos && eq > 0 && eq + 1 < entry.size(),
              "optimizer.param_groups: malformed entry '", entry,
              "'; expected GLOB=WEIGHT_DECAY, e.g. '*norm*=0'");
  const std::string value = entry.substr(eq + 1);
  double weight_decay = 0;
  TITAN_CHECK(parse_double(value, weight_decay) && std::isfinite(weight_decay) && weight_decay >= 0,
              "optimizer.param_groups: entry '", entry, "' has weight decay '", value,
              "'; expected a non-negative number");
  return {entry.substr(0, eq), weight_decay};
}

int64_t selective_ac_frequency(const std::string& option) {
  int64_t every = 0;
  if (option == "op") return 0;
  if (parse_int64(option, every) && every >= 1) return every;
  fail("activation_checkpoint.selective_ac_option = \"", option,
       "\": accepted values are a positive integer N (every N-th block) or op");
}

void validate_optimizer_config(const OptimizerConfig& o) {
  // The names bitsandbytes, the Hugging Face Trainer (optim) and PEFT recipes use for 8-bit AdamW.
  std::string lower = o.name;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (o.name != "AdamW8bit" && lower.find("8bit") != std::string::npos)
    fail("optimizer.name = \"", o.name,
         "\": titan's 8-bit AdamW (bitsandbytes' AdamW8bit, the Hugging Face Trainer's "
         "adamw_bnb_8bit / adamw_8bit) is AdamW8bit",
         lower.find("paged") != std::string::npos
             ? "; paged optimizers are not offered (their states are ordinary buffers here)"
             : "");
  check_one_of("optimizer.name", o.name, {"AdamW", "AdamW8bit"});
  check_range(std::isfinite(o.lr) && o.lr >= 0, "optimizer.lr", o.lr, ">= 0");
  check_range(o.betas.size() == 2, "optimizer.betas", o.betas,
              "exactly two values, e.g. [0.9, 0.95]");
  for (const double beta : o.betas) {
    check_range(beta >= 0 && beta < 1, "optimizer.betas", o.betas, "two values in [0, 1)");
  }
  check_range(std::isfinite(o.eps) && o.eps > 0, "optimizer.eps", o.eps, "> 0");
  check_range(std::isfinite(o.weight_decay) && o.weight_decay >= 0, "optimizer.weight_decay",
              o.weight_decay, ">= 0");
  if (o.name == "AdamW8bit") {
    TITAN_CHECK(o.implementation != "foreach", "optimizer.implementation = \"foreach\": ",
                "AdamW8bit has fused (the one-pass 8-bit kernel) and for-loop (bitsandbytes' own "
                "sequence of ops)");
    check_range(o.min_8bit_size >= 0, "optimizer.min_8bit_size", o.min_8bit_size, ">= 0");
  }
  check_one_of("optimizer.implementation", o.implementation, {"fused", "foreach", "for-loop"});
  for (const auto& entry : o.param_groups) parse_param_group_entry(entry);
}

void validate_config(const TrainerConfig& c, const std::vector<std::string>& model_names) {
  if (!model_names.empty()) check_one_of("model.name", c.model.name, model_names);
  check_one_of("job.config_notes", c.job.config_notes, {"each", "summary", "off"});
  TITAN_CHECK(!c.model.name.empty(), "model.name is empty: name a model (e.g. qwen3)");
  TITAN_CHECK(!c.model.flavor.empty(), "model.flavor is empty: name a flavor or use \"auto\"");
  check_one_of("model.moe_load_balancing", c.model.moe_load_balancing,
               {"none", "aux_loss", "expert_bias"});
  check_range(c.model.router_aux_loss_coef >= 0, "model.router_aux_loss_coef",
              c.model.router_aux_loss_coef, ">= 0");
  check_range(c.model.expert_bias_update_rate >= 0, "model.expert_bias_update_rate",
              c.model.expert_bias_update_rate, ">= 0");

  for (const std::string& converter : c.model.converters) {
    // torchtitan's other converters, by their torchtitan names.
    TITAN_CHECK(converter.find("float8") == std::string::npos &&
                    converter.find("mx") == std::string::npos &&
                    converter.find("nvfp4") == std::string::npos,
                "model.converters = \"", converter,
                "\": titan has no float8, MX or NVFP4 training (torchtitan's quantization "
                "converters); accepted values are lora");
    check_one_of("model.converters", converter, {"lora"});
  }
  const auto& l = c.lora;
  check_at_least("lora.rank", l.rank, 1);
  check_range(l.alpha > 0, "lora.alpha", l.alpha, "> 0");
  check_range(l.dropout >= 0 && l.dropout < 1, "lora.dropout", l.dropout, "in [0, 1)");
  check_one_of("lora.base_quantization", l.base_quantization, {"none", "nf4"});
  check_one_of("lora.export_format", l.export_format, {"adapter", "merged", "both"});
  for (const std::string& glob : l.target_modules)
    TITAN_CHECK(!glob.empty(), "lora.target_modules has an empty entry: name a module path");

  const auto& t = c.training;
  check_at_least("training.steps", t.steps, 1);
  check_at_least("training.local_batch_size", t.local_batch_size, 1);
  if (t.global_batch_size != -1) {
    check_range(t.global_batch_size >= 1, "training.global_batch_size", t.global_batch_size,
                ">= 1 or -1 (local_batch_size x data-parallel degree)");
  }
  check_at_least("training.seq_len", t.seq_len, 1);
  check_at_least("training.prefetch_batches", t.prefetch_batches, 0);
  check_one_of("training.packing", t.packing, {"megatron", "hf_flattening", "torchtitan"});
  TITAN_CHECK(t.document_masking == (t.packing != "megatron"),
              "training.document_masking = ", t.document_masking ? "true" : "false",
              " does not fit training.packing = \"", t.packing,
              "\" (hf_flattening and torchtitan are block-causal, megatron is not)");
  check_range(t.max_norm > 0, "training.max_norm", t.max_norm, "> 0");
  check_one_of("training.dtype", t.dtype, {"float32", "bfloat16"});
  check_one_of("training.mixed_precision_param", t.mixed_precision_param,
               {"auto", "float32", "bfloat16"});
  check_one_of("training.mixed_precision_reduce", t.mixed_precision_reduce,
               {"float32", "bfloat16"});
  check_one_of("training.device", t.device, {"auto", "cpu", "cuda"});
  TITAN_CHECK(!t.eos_token.empty(), "training.eos_token is empty: name the separator token");

  check_objective(c);

  check_degrees(c.parallelism);
  check_one_of("parallelism.fsdp_reshard_after_forward", c.parallelism.fsdp_reshard_after_forward,
               {"default", "always", "never"});
  check_pipeline(c.parallelism, c.training);

  validate_optimizer_config(c.optimizer);

  const auto& s = c.lr_scheduler;
  check_at_least("lr_scheduler.warmup_steps", s.warmup_steps, 0);
  if (s.total_steps != -1) {
    check_range(s.total_steps >= 1, "lr_scheduler.total_steps", s.total_steps,
                ">= 1 or -1 (training.steps)");
  }
  check_range(s.decay_ratio == -1.0 || (s.decay_ratio >= 0 && s.decay_ratio <= 1),
              "lr_scheduler.decay_ratio", s.decay_ratio, "in [0, 1] or -1 (decay after warmup)");
  check_one_of("lr_scheduler.decay_type", s.decay_type, {"linear", "sqrt", "cosine"});
  check_range(s.min_lr_factor >= 0 && s.min_lr_factor <= 1, "lr_scheduler.min_lr_factor",
              s.min_lr_factor, "in [0, 1]");

  const auto& k = c.checkpoint;
  TITAN_CHECK(!k.folder.empty(), "checkpoint.folder is empty: name a folder under job.dump_folder");
  check_at_least("checkpoint.interval", k.interval, 1);
  check_one_of("checkpoint.export_dtype", k.export_dtype, {"float32", "bfloat16", "float16"});
  TITAN_CHECK(!k.hf_max_shard_size.empty(),
              "checkpoint.hf_max_shard_size is empty: give a size such as \"5GB\"");
  check_range(k.keep_latest_k >= 0, "checkpoint.keep_latest_k", k.keep_latest_k,
              ">= 0 (0 keeps every checkpoint)");
  check_one_of("checkpoint.async_mode", k.async_mode, {"disabled", "async"});
  check_range(k.load_step >= -1, "checkpoint.load_step", k.load_step, ">= 0 or -1 (the latest)");

  check_activation_checkpoint(c.activation_checkpoint);
  for (const auto& entry : c.overrides.imports) {
    TITAN_CHECK(entry.find('=') != std::string::npos, "override.imports entry \"", entry,
                "\": expected OP=IMPL or OP=IMPL@GLOB, e.g. \"moe_experts=fused@layers.*.moe\"");
  }
  for (const auto& library : c.overrides.libraries) {
    TITAN_CHECK(!library.empty(), "override.libraries has an empty entry: name a shared library");
  }
  check_at_least("metrics.log_freq", c.metrics.log_freq, 1);
  check_at_least("comm.init_timeout_seconds", c.comm.init_timeout_seconds, 1);
  check_at_least("comm.train_timeout_seconds", c.comm.train_timeout_seconds, 1);
  check_at_least("debug.checkpoint_write_delay_ms", c.debug.checkpoint_write_delay_ms, 0);
  check_at_least("debug.step_delay_ms", c.debug.step_delay_ms, 0);
  check_at_least("profiling.profile_freq", c.profiling.profile_freq, 1);
  TITAN_CHECK(!c.training.dataset_text_field.empty(),
              "training.dataset_text_field is empty: name the jsonl field (or Parquet/Arrow "
              "column) that holds the text");
  if (c.validator.enable) {
    check_at_least("validator.freq", c.validator.freq, 1);
    check_range(c.validator.steps == -1 || c.validator.steps >= 1, "validator.steps",
                c.validator.steps, ">= 1 or -1 (the whole file)");
    TITAN_CHECK(!c.validator.dataset_path.empty(),
                "validator.enable is true but validator.dataset_path is empty: name the held-out "
                "file");
  }
}

int64_t resolved_data_parallel_shard_degree(const ParallelismConfig& p, int64_t world_size) {
  TITAN_CHECK(world_size >= 1, "world size ", world_size, " must be >= 1");
  check_degrees(p);
  const int64_t others = p.data_parallel_replicate_degree * p.context_parallel_degree *
                         p.tensor_parallel_degree * p.pipeline_parallel_degree;
  int64_t shard = p.data_parallel_shard_degree;
  if (shard == -1) {
    if (world_size % others != 0) {
      fail("parallelism degrees (", describe_degrees(p), ") do not divide the world size ",
           world_size, ": the product of the other degrees, ", others,
           ", must divide it so data_parallel_shard_degree -1 can take the rest");
    }
    shard = world_size / others;
  }
  if (others * shard != world_size) {
    fail("parallelism degrees (", describe_degrees(p), ") multiply to ", others * shard,
         " but the world size is ", world_size,
         "; make the product equal the number of ranks, or set data_parallel_shard_degree -1");
  }
  return shard;
}

void check_parallel_degrees(const ParallelismConfig& p, int64_t world_size) {
  const int64_t shard = resolved_data_parallel_shard_degree(p, world_size);
  // Experts are spread over ranks borrowed from shard x context x tensor (torchtitan with
  // expert tensor parallelism 1).
  const int64_t borrowed = shard * p.context_parallel_degree * p.tensor_parallel_degree;
  if (borrowed % p.expert_parallel_degree != 0) {
    fail("parallelism.expert_parallel_degree = ", p.expert_parallel_degree,
         " must divide data_parallel_shard_degree x context_parallel_degree x "
         "tensor_parallel_degree = ",
         borrowed, " (", describe_degrees(p), "; world size ", world_size, ")");
  }
}

}  // namespace titan::config
