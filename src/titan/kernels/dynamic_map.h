// bitsandbytes' dynamic 8-bit quantisation maps (functional.create_dynamic_map with
// max_exponent_bits 7, total_bits 8): 256 ascending float32 values in [-1, 1] (signed) or
// [0, 1] (unsigned), dense near zero and sparse near one, so that one byte keeps a value's
// magnitude over seven decades. The signed map quantises NF4's double-quantised scales
// (nf4.h) and AdamW8bit's first moment, the unsigned one AdamW8bit's second moment
// (blockwise_8bit.h).
#pragma once

#include <ATen/ATen.h>

namespace titan::kernels {

// signed: 127 negative values, 0 at index 127, 127 positive values and 1 at index 255.
// unsigned: 0 at index 0, 254 positive values and 1 at index 255.
const at::Tensor& dynamic_map(bool is_signed = true);

}  // namespace titan::kernels
