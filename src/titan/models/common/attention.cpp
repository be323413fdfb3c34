#include "titan/models/common/attention.h"

#include <cmath>
#include <optional>

namespace titan::models {

at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            int64_t past) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
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

}  // namespace titan::models
