// Rotary position embedding tables, half-split ("NeoX") layout, as Hugging Face's Qwen3 and
// Llama compute them (docs/qwen3.md section 2.3): inverse frequencies and angles in float32,
// cos/sin rounded to the activation dtype before use. Applying them to q and k is the overridable
// op `rope` (kernels/ops.h).
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <string>

namespace titan::models {

struct RopeSettings {
  int64_t head_dim = 128;
  double theta = 10000.0;
  // "default", "yarn" (Qwen3's long context) or "llama3" (Llama 3.1's smooth low-frequency
  // scaling); the remaining fields are theirs, as Hugging Face's rope_parameters name them.
  std::string type = "default";
  double factor = 1.0;
  int64_t original_max_position_embeddings = 0;
  std::optional<double> attention_factor;  // yarn
  double beta_fast = 32.0;                 // yarn
  double beta_slow = 1.0;                  // yarn
  bool truncate = true;                    // yarn
  double low_freq_factor = 1.0;            // llama3
  double high_freq_factor = 4.0;           // llama3
};

// inv_freq [head_dim / 2] (float32, CPU) and the factor cos/sin are multiplied by.
struct RopeFrequencies {
  at::Tensor inv_freq;
  double attention_scaling = 1.0;
};
RopeFrequencies rope_frequencies(const RopeSettings& settings);

// cos and sin [seq_len, head_dim] for positions 0..seq_len-1, in `dtype` on `device`.
struct RopeTables {
  at::Tensor cos;
  at::Tensor sin;
};
RopeTables rope_tables(const RopeFrequencies& freqs, int64_t seq_len, at::ScalarType dtype,
                       at::Device device);

}  // namespace titan::models
