#include "titan/models/common/rope.h"

#include <algorithm>
#include <cmath>

#include "titan/common/error.h"

namespace titan::models {
namespace {

// The YaRN correction dimension for `rotations` full turns over the original context.
double correction_dim(double rotations, int64_t dim, double base, int64_t original_max) {
  return (static_cast<double>(dim) *
          std::log(static_cast<double>(original_max) / (rotations * 2.0 * M_PI))) /
         (2.0 * std::log(base));
}

// Llama 3.1's scaling (transformers' _compute_llama3_parameters, op for op: Python's
// `scalar / tensor` is reciprocal(tensor) * scalar): wavelengths above the original context
// over low_freq_factor are slowed by `factor`, those below it over high_freq_factor kept, and
// the band between interpolated smoothly.
at::Tensor llama3_scaled(const at::Tensor& inv_freq, const RopeSettings& s) {
  const double old_context = static_cast<double>(s.original_max_position_embeddings);
  const double low_freq_wavelen = old_context / s.low_freq_factor;
  const double high_freq_wavelen = old_context / s.high_freq_factor;
  const at::Tensor wavelen = at::reciprocal(inv_freq) * (2 * M_PI);
  at::Tensor scaled = at::where(wavelen > low_freq_wavelen, inv_freq / s.factor, inv_freq);
  const at::Tensor smooth = (at::reciprocal(wavelen) * old_context - s.low_freq_factor) /
                            (s.high_freq_factor - s.low_freq_factor);
  const at::Tensor smoothed = (1 - smooth) * scaled / s.factor + smooth * scaled;
  const at::Tensor medium =
      (wavelen < high_freq_wavelen).logical_not() & (wavelen > low_freq_wavelen).logical_not();
  return at::where(medium, smoothed, scaled);
}

}  // namespace

RopeFrequencies rope_frequencies(const RopeSettings& s) {
  const int64_t dim = s.head_dim;
  // Same op sequence as transformers: base ** (arange(0, dim, 2).float() / dim), reciprocal.
  const at::Tensor exponent = at::arange(0, dim, 2, at::kFloat) / static_cast<double>(dim);
  const at::Tensor pos_freqs = at::pow(s.theta, exponent);
  RopeFrequencies out;
  if (s.type == "llama3") {
    out.inv_freq = llama3_scaled(at::reciprocal(pos_freqs), s);
    return out;
  }
  TITAN_CHECK(s.type == "default" || s.type == "yarn", "RoPE type '", s.type,
              "' is not supported (default, yarn, llama3)");
  if (s.type == "default") {
    out.inv_freq = at::reciprocal(pos_freqs);
    return out;
  }
  const double factor = s.factor;
  out.attention_scaling =
      s.attention_factor.value_or(factor <= 1 ? 1.0 : 0.1 * std::log(factor) + 1.0);
  const at::Tensor extrapolation = at::reciprocal(pos_freqs);
  const at::Tensor interpolation = at::reciprocal(factor * pos_freqs);
  double low = correction_dim(s.beta_fast, dim, s.theta, s.original_max_position_embeddings);
  double high = correction_dim(s.beta_slow, dim, s.theta, s.original_max_position_embeddings);
  if (s.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(dim - 1));
  if (low == high) high += 0.001;  // as HF: avoid a zero-width ramp
  const at::Tensor ramp = at::clamp((at::arange(dim / 2, at::kFloat) - low) / (high - low), 0, 1);
  const at::Tensor extrapolation_weight = 1 - ramp;
  out.inv_freq = interpolation * (1 - extrapolation_weight) + extrapolation * extrapolation_weight;
  return out;
}

RopeTables rope_tables(const RopeFrequencies& freqs, int64_t seq_len, at::ScalarType dtype,
                       at::Device device) {
  const at::Tensor inv_freq = freqs.inv_freq.to(device, at::kFloat);
  const at::Tensor positions = at::arange(seq_len, at::TensorOptions(device).dtype(at::kFloat));
  // One fp32 multiply per entry, as HF's [d/2,1]x[1,S] matmul does.
  const at::Tensor angles = at::outer(positions, inv_freq);
  const at::Tensor emb = at::cat({angles, angles}, -1);
  RopeTables t;
  t.cos = emb.cos();
  t.sin = emb.sin();
  if (freqs.attention_scaling != 1.0) {
    t.cos = t.cos * freqs.attention_scaling;
    t.sin = t.sin * freqs.attention_scaling;
  }
  t.cos = t.cos.to(dtype);
  t.sin = t.sin.to(dtype);
  return t;
}

}  // namespace titan::models
