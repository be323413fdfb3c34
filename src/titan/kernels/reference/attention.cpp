// Causal grouped-query attention through ATen's scaled_dot_product_attention (flash-style
// kernels: fp32 running statistics, no materialised low-precision probabilities), matching
// Hugging Face's default sdpa path.
#include <optional>

#include "titan/kernels/reference/reference.h"

namespace titan::kernels::reference {

at::Tensor attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale,
                     int64_t past) {
  const bool gqa = q.size(1) != k.size(1);
  if (past == 0) {
    return at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, /*dropout_p=*/0.0,
                                            /*is_causal=*/true, scale, gqa);
  }
  // is_causal aligns the mask top-left; with cached keys the diagonal sits `past` columns in.
  std::optional<at::Tensor> mask;
  const int64_t n = q.size(2);
  if (n > 1) {
    const auto opts = at::TensorOptions(q.device()).dtype(at::kLong);
    mask = at::arange(past + n, opts).unsqueeze(0) <= (at::arange(n, opts) + past).unsqueeze(1);
  }
  return at::scaled_dot_product_attention(q, k, v, mask, 0.0, /*is_causal=*/false, scale, gqa);
}

}  // namespace titan::kernels::reference
