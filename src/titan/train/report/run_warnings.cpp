#include "titan/train/report/run_warnings.h"

#include <ATen/cpu/Utils.h>

#include <iostream>

namespace titan::train {

bool cpu_has_native_bf16() {
  for (const auto& [name, value] : at::cpu::get_cpu_capabilities()) {
    if ((name == "avx512_bf16" || name == "amx_bf16") && value.isBool() && value.toBool())
      return true;
  }
  return false;
}

std::vector<std::string> config_warnings(const config::TrainerConfig& cfg,
                                         const Precision& precision) {
  std::vector<std::string> warnings;
  const auto& s = cfg.lr_scheduler;
  const int64_t total = s.total_steps == -1 ? cfg.training.steps : s.total_steps;
  if (s.warmup_steps > total) {
    warnings.push_back("lr_scheduler.warmup_steps = " + std::to_string(s.warmup_steps) +
                       " is more than the " + std::to_string(total) + " steps of the schedule (" +
                       (s.total_steps == -1 ? "training.steps" : "lr_scheduler.total_steps") +
                       "): the warmup is clipped to " + std::to_string(total) +
                       " steps, so the lr rises to its peak at the last step and never decays");
  }
  if (cfg.training.sft && !cfg.training.document_masking) {
    warnings.emplace_back(
        "training.sft is on but training.document_masking is off: the conversations packed into "
        "a row attend to each other; set training.document_masking = true (or training.packing "
        "hf_flattening or torchtitan)");
  }
  const bool bf16 = precision.compute_dtype == at::kBFloat16;
  if (bf16 && precision.device.is_cpu() &&
      (cfg.debug.assume_cpu_without_bf16 || !cpu_has_native_bf16())) {
    warnings.push_back(std::string("bfloat16 compute (") +
                       (precision.param_dtype == at::kBFloat16 ? "training.dtype"
                                                               : "training.mixed_precision_param") +
                       " = \"bfloat16\") on a CPU without bf16 instructions (AVX512-BF16 or "
                       "AMX-BF16): it is emulated, many times slower than float32; "
                       "training.mixed_precision_param = \"float32\" is faster here");
  }
  return warnings;
}

std::optional<std::string> seq_len_warning(int64_t seq_len, const nlohmann::json& hf_config,
                                           const std::string& what) {
  if (!hf_config.is_object() || !hf_config.contains("max_position_embeddings") ||
      !hf_config["max_position_embeddings"].is_number_integer())
    return std::nullopt;
  const int64_t max_positions = hf_config["max_position_embeddings"].get<int64_t>();
  if (seq_len <= max_positions) return std::nullopt;
  return what + " = " + std::to_string(seq_len) +
         " is beyond the model's max_position_embeddings (" + std::to_string(max_positions) +
         "): positions past it were never trained, and the rotary embedding extrapolates there";
}

void print_warning(const std::string& warning) {
  std::cerr << "[titan] warning: " << warning << std::endl;
}

}  // namespace titan::train
