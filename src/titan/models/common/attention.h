// Causal grouped-query attention through ATen's scaled_dot_product_attention (flash-style
// kernels: fp32 running statistics, no materialised low-precision probabilities), matching
// Hugging Face's default sdpa path (QWEN3_SPEC.md 2.4).
#pragma once

#include <ATen/ATen.h>

namespace titan::models {

// q [B, nq, S, d], k/v [B, nkv, S, d] with nq a multiple of nkv; query head h reads kv head
// h / (nq / nkv). Scale is 1/sqrt(d). Returns [B, nq, S, d].
// With `past` > 0 the keys/values hold `past` earlier tokens before the S new ones (kv length
// past + S) and query i sees keys 0..past+i (incremental decoding).
at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            int64_t past = 0);

}  // namespace titan::models
