// The `reference` implementation of every overridable op: plain ATen with autograd, numerically
// what Hugging Face Transformers' Qwen3 computes (docs/qwen3.md). Other implementations are
// tested against these.
#pragma once

#include "titan/kernels/ops.h"

namespace titan::kernels {
class KernelRegistry;
}

namespace titan::kernels::reference {

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);
RotatedQueryKey rope(const at::Tensor& q, const at::Tensor& k, const at::Tensor& cos,
                     const at::Tensor& sin);
at::Tensor attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale,
                     int64_t past, const at::Tensor& document_ids);
at::Tensor swiglu(const at::Tensor& x, const at::Tensor& gate_proj, const at::Tensor& up_proj,
                  const at::Tensor& down_proj);
Routing moe_router(const at::Tensor& x, const at::Tensor& router_weight, int64_t top_k,
                   bool norm_topk_prob, const at::Tensor& expert_bias);
at::Tensor moe_experts(const at::Tensor& x, const Routing& routing, const at::Tensor& gate_up,
                       const at::Tensor& down);
at::Tensor cross_entropy(const at::Tensor& hidden, const at::Tensor& weight,
                         const at::Tensor& labels, int64_t ignore_index);
DispatchedTokens moe_dispatch(const at::Tensor& x, const Routing& routing, int64_t num_experts,
                              const ExpertGroup& group);
at::Tensor moe_combine(const at::Tensor& expert_rows, const DispatchedTokens& dispatched,
                       const Routing& routing, const ExpertGroup& group);
at::Tensor nf4_linear(const at::Tensor& x, const Nf4Weight& weight);
at::Tensor context_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                             double scale, const at::Tensor& query_index,
                             const at::Tensor& document_ids);

// The cross_entropy op with an explicit chunk size (rows per chunk; 0 picks one that keeps a
// chunk's float32 logits near 256 MB). The logits of one chunk at a time are materialised, and
// the gradients with respect to hidden and weight are computed in the forward pass, chunk by
// chunk (the Liger-Kernel approach); backward only scales them by the incoming gradient.
at::Tensor linear_cross_entropy_sum(const at::Tensor& hidden, const at::Tensor& weight,
                                    const at::Tensor& labels, int64_t ignore_index,
                                    int64_t chunk_rows);

// Adds every function above to `registry` as the implementation named "reference".
void register_reference_kernels(KernelRegistry& registry);

}  // namespace titan::kernels::reference
