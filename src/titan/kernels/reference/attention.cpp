// Causal grouped-query attention through ATen's scaled_dot_product_attention (flash-style
// kernels: fp32 running statistics, no materialised low-precision probabilities), matching
// Hugging Face's default sdpa path. Packed documents (document_ids defined) get a block-causal
// boolean mask, which SDPA runs with its memory-efficient kernel on CUDA and its fused CPU kernel.
#include <optional>

#include "titan/common/error.h"
#include "titan/kernels/reference/reference.h"

namespace titan::kernels::reference {

at::Tensor attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale,
                     int64_t past, const at::Tensor& document_ids) {
  const bool gqa = q.size(1) != k.size(1);
  const int64_t n = q.size(2);
  const auto opts = at::TensorOptions(q.device()).dtype(at::kLong);
  if (document_ids.defined()) {
    TITAN_CHECK(past == 0 && document_ids.dim() == 2 && document_ids.size(0) == q.size(0) &&
                    document_ids.size(1) == n,
                "attention: document ids [B, S] = [", q.size(0), ", ", n,
                "] expected without a KV cache, got ", document_ids.sizes(), " with past ", past);
    const at::Tensor ids = document_ids.to(q.device());
    const at::Tensor causal = at::arange(n, opts).unsqueeze(0) <= at::arange(n, opts).unsqueeze(1);
    // [B, 1, S, S]: same document and not in the future.
    const at::Tensor mask =
        (ids.unsqueeze(2) == ids.unsqueeze(1)).logical_and_(causal).unsqueeze(1);
    return at::scaled_dot_product_attention(q, k, v, mask, 0.0, /*is_causal=*/false, scale, gqa);
  }
  if (past == 0) {
    return at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, /*dropout_p=*/0.0,
                                            /*is_causal=*/true, scale, gqa);
  }
  // is_causal aligns the mask top-left; with cached keys the diagonal sits `past` columns in.
  std::optional<at::Tensor> mask;
  if (n > 1) {
    mask = at::arange(past + n, opts).unsqueeze(0) <= (at::arange(n, opts) + past).unsqueeze(1);
  }
  return at::scaled_dot_product_attention(q, k, v, mask, 0.0, /*is_causal=*/false, scale, gqa);
}

}  // namespace titan::kernels::reference
