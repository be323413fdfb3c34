// Row access for the CPU kernels: a row of a float32 or bfloat16 tensor as float32 (the row
// itself for float32, a converted copy in a caller's scratch buffer for bfloat16), so that the
// math is written once, on float32 rows (vector_math.h).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "titan/kernels/cpu/vector_math.h"

namespace titan::kernels::cpu {

class Rows {
 public:
  explicit Rows(const at::Tensor& t)  // t contiguous, float32 or bfloat16
      : base_(const_cast<void*>(t.const_data_ptr())),
        is_float_(t.scalar_type() == at::kFloat),
        width_(t.dim() == 0 ? 1 : t.size(-1)) {}

  int64_t width() const { return width_; }

  // Row r as float32 (valid until `scratch` is reused).
  const float* read(int64_t r, std::vector<float>& scratch) const {
    if (is_float_) return static_cast<const float*>(base_) + r * width_;
    scratch.resize(width_);
    vec::bf16_to_float(static_cast<const uint16_t*>(base_) + r * width_, scratch.data(), width_);
    return scratch.data();
  }
  // Where to compute row r: the row itself for float32, `scratch` otherwise; then write(r, ...).
  float* target(int64_t r, std::vector<float>& scratch) const {
    if (is_float_) return static_cast<float*>(base_) + r * width_;
    scratch.resize(width_);
    return scratch.data();
  }
  void write(int64_t r, const float* row) const {
    if (!is_float_) vec::float_to_bf16(row, static_cast<uint16_t*>(base_) + r * width_, width_);
  }

 private:
  void* base_;
  bool is_float_;
  int64_t width_;
};

// Rounds a float32 row to bfloat16 precision in place when `dtype` is bfloat16 (reference rounds
// some intermediate values to the activations' dtype; the kernels round at the same points).
inline void round_to(at::ScalarType dtype, float* row, int64_t n, std::vector<uint16_t>& scratch) {
  if (dtype != at::kBFloat16) return;
  scratch.resize(n);
  vec::float_to_bf16(row, scratch.data(), n);
  vec::bf16_to_float(scratch.data(), row, n);
}

}  // namespace titan::kernels::cpu
