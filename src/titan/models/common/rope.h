// Rotary position embedding tables, half-split ("NeoX") layout, as Hugging Face Qwen3 computes
// them (docs/qwen3.md section 2.3): inverse frequencies and angles in float32, cos/sin rounded to
// the activation dtype before use. Applying them to q and k is the overridable op `rope`
// (kernels/ops.h).
#pragma once

#include <ATen/ATen.h>

#include <optional>

namespace titan::models {

struct RopeSettings {
  int64_t head_dim = 128;
  double theta = 10000.0;
  // "default" or "yarn"; the remaining fields are YaRN's.
  bool yarn = false;
  double factor = 1.0;
  int64_t original_max_position_embeddings = 0;
  std::optional<double> attention_factor;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  bool truncate = true;
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
