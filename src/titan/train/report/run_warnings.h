// Settings that are legal but change what a run does without saying so. Each gets one line,
// "[titan] warning: ...", naming the keys and what happens instead, printed once (rank 0)
// before training starts; the resumed-run check is resume_config_check.h.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "titan/config/trainer_config.h"
#include "titan/train/precision.h"

namespace titan::train {

// Whether this CPU has bf16 arithmetic instructions (x86 AVX512-BF16 or AMX-BF16, as torch's
// cpuinfo reports them); without them bf16 compute is emulated and far slower than float32.
bool cpu_has_native_bf16();

// The warnings a config gives before anything is built: the warmup clipped to the schedule,
// SFT without document masking, bf16 compute on a CPU without bf16 instructions.
std::vector<std::string> config_warnings(const config::TrainerConfig& cfg,
                                         const Precision& precision);

// A sequence longer than the model's max_position_embeddings (from its Hugging Face config);
// `what` names the setting, e.g. "training.seq_len". nullopt when it fits or the config has no
// such field.
std::optional<std::string> seq_len_warning(int64_t seq_len, const nlohmann::json& hf_config,
                                           const std::string& what);

// Prints one "[titan] warning: ..." line on stderr.
void print_warning(const std::string& warning);

}  // namespace titan::train
