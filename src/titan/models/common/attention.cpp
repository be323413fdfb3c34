#include "titan/models/common/attention.h"

#include <cmath>

namespace titan::models {

at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  return at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, /*dropout_p=*/0.0,
                                          /*is_causal=*/true, scale,
                                          /*enable_gqa=*/q.size(1) != k.size(1));
}

}  // namespace titan::models
