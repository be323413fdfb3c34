#include "titan/train/state/resume_config_check.h"

#include "titan/checkpoint/training_checkpoint.h"

#include <optional>
#include "titan/common/error.h"
#include "titan/common/strings.h"
#include "titan/config/config_fields.h"
#include "titan/config/field_values.h"
#include "titan/config/toml_overlay.h"
#include "titan/train/report/run_warnings.h"

namespace titan::train {
namespace {

int64_t schedule_steps(const config::TrainerConfig& c) {
  return c.lr_scheduler.total_steps == -1 ? c.training.steps : c.lr_scheduler.total_steps;
}

// Rows per optimizer step of the saved run: its global_batch_size, or, when that was -1
// (local_batch_size x its data-parallel degree, which the config does not record), what its
// tokens per step say.
std::optional<int64_t> saved_global_batch(const config::TrainerConfig& saved,
                                          const nlohmann::json& state) {
  if (saved.training.global_batch_size != -1) return saved.training.global_batch_size;
  const nlohmann::json& train_state = state.value("train_state", nlohmann::json::object());
  const int64_t step = train_state.value("step", int64_t{0});
  const int64_t tokens = train_state.value("tokens_seen", int64_t{0});
  const int64_t per_step = step * saved.training.seq_len;
  if (step <= 0 || tokens <= 0 || tokens % per_step != 0) return std::nullopt;
  return tokens / per_step;
}

template <class T>
void compare(std::vector<std::string>& out, const std::string& name, const T& before,
             const T& after) {
  if (before == after) return;
  out.push_back(name + " " + config::format_toml_value(before) + " -> " +
                config::format_toml_value(after));
}

}  // namespace

std::string saved_config_text(const config::TrainerConfig& cfg) { return config::to_toml(cfg); }

std::vector<std::string> resume_config_differences(const config::TrainerConfig& now,
                                                   int64_t global_batch,
                                                   const std::string& step_dir) {
  const checkpoint::CheckpointReader reader(step_dir);
  const nlohmann::json& state = reader.state();
  if (!state.contains("config") || !state["config"].is_string()) return {};
  config::TrainerConfig saved;
  try {
    config::apply_toml_text(saved, state["config"].get<std::string>(),
                            step_dir + "/manifest.json (state.config)");
  } catch (const Error& e) {
    // Written by another version of titan with other keys: say so rather than stop.
    return {"its saved config cannot be compared (" + std::string(e.what()) + ")"};
  }
  std::vector<std::string> out;
  if (const std::optional<int64_t> before = saved_global_batch(saved, state))
    compare(out, "global batch (rows per step)", *before, global_batch);
  compare(out, "training.seq_len", saved.training.seq_len, now.training.seq_len);
  compare(out, "training.dataset_path", saved.training.dataset_path, now.training.dataset_path);
  compare(out, "training.packing", saved.training.packing, now.training.packing);
  compare(out, "training.eos_token", saved.training.eos_token, now.training.eos_token);
  compare(out, "training.steps", saved.training.steps, now.training.steps);
  compare(out, "optimizer.name", saved.optimizer.name, now.optimizer.name);
  compare(out, "optimizer.lr", saved.optimizer.lr, now.optimizer.lr);
  const auto& a = saved.lr_scheduler;
  const auto& b = now.lr_scheduler;
  compare(out, "lr_scheduler.warmup_steps", a.warmup_steps, b.warmup_steps);
  compare(out, "lr schedule length (lr_scheduler.total_steps)", schedule_steps(saved),
          schedule_steps(now));
  compare(out, "lr_scheduler.decay_ratio", a.decay_ratio, b.decay_ratio);
  compare(out, "lr_scheduler.decay_type", a.decay_type, b.decay_type);
  compare(out, "lr_scheduler.min_lr_factor", a.min_lr_factor, b.min_lr_factor);
  return out;
}

std::optional<std::string> ignored_initial_load(const config::TrainerConfig& now,
                                                const std::string& step_dir) {
  const std::string& path = now.checkpoint.initial_load_path;
  if (path.empty()) return std::nullopt;
  const checkpoint::CheckpointReader reader(step_dir);
  const nlohmann::json& state = reader.state();
  if (state.contains("config") && state["config"].is_string()) {
    config::TrainerConfig saved;
    try {
      config::apply_toml_text(saved, state["config"].get<std::string>(), step_dir);
      if (saved.checkpoint.initial_load_path == path) return std::nullopt;  // the same job again
    } catch (const Error&) {
      // Another version's config: say it anyway.
    }
  }
  return "checkpoint.initial_load_path " + path + " is not loaded: job.dump_folder " +
         now.job.dump_folder + " already holds a training checkpoint, so the run resumes from " +
         step_dir + "; to start from " + path + ", give another --job.dump_folder";
}

void check_resumable_model(const nlohmann::json& here, const std::string& name,
                           const std::string& step_dir) {
  const checkpoint::CheckpointReader reader(step_dir);
  const nlohmann::json& state = reader.state();
  if (!state.contains("model") || !state["model"].is_object()) return;
  const nlohmann::json& saved = state["model"];
  const std::string advice =
      "; this run builds another model: resume it with the model settings it was saved with, "
      "or give another --job.dump_folder (or --checkpoint.enable false) to train this one "
      "afresh";
  const std::string saved_name = saved.value("name", std::string("qwen3"));
  TITAN_CHECK(saved_name == name, "job.dump_folder holds a training checkpoint, ", step_dir,
              ", of model.name ", saved_name, ", not ", name, advice);
  if (!saved.contains("hf_config") || !saved["hf_config"].is_object()) return;
  const nlohmann::json& there = saved["hf_config"];
  // The fields that decide the model's tensors and their shapes.
  for (const char* field :
       {"model_type", "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
        "num_attention_heads", "num_key_value_heads", "head_dim", "num_experts",
        "num_experts_per_tok", "moe_intermediate_size", "tie_word_embeddings"}) {
    const nlohmann::json a = there.contains(field) ? there[field] : nlohmann::json();
    const nlohmann::json b = here.contains(field) ? here[field] : nlohmann::json();
    TITAN_CHECK(a == b, "job.dump_folder holds a training checkpoint, ", step_dir,
                ", of another architecture: its ", field, " is ", a.is_null() ? "absent" : a.dump(),
                ", this run's ", b.is_null() ? "absent" : b.dump(), advice);
  }
}

void warn_on_resume_config_change(const config::TrainerConfig& now, int64_t global_batch,
                                  const std::string& step_dir, bool talk) {
  if (talk) {
    if (const std::optional<std::string> ignored = ignored_initial_load(now, step_dir))
      print_warning(*ignored);
  }
  const std::vector<std::string> differences =
      resume_config_differences(now, global_batch, step_dir);
  if (!talk || differences.empty()) return;
  print_warning(
      "resuming from " + step_dir +
      " with settings that differ from those it was saved with: " + join(differences, ", ") +
      "; the run goes on with the new values (it does not continue the saved one "
      "exactly)");
}

}  // namespace titan::train
