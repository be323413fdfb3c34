#include "titan/kernels/reference/reference.h"
#include "titan/kernels/registry.h"

namespace titan::kernels::reference {

void register_reference_kernels(KernelRegistry& registry) {
  auto add = [&](OpFunction fn, const char* description) {
    registry.add({"reference", "built-in", description, fn, /*supports_fn=*/nullptr});
  };
  add(RmsNormFn{&rms_norm}, "ATen ops, float32 statistics (Hugging Face's Qwen3RMSNorm)");
  add(RopeFn{&rope}, "ATen ops, half-split rotation");
  add(AttentionFn{&attention}, "at::scaled_dot_product_attention, causal or block-causal, GQA");
  add(SwigluFn{&swiglu}, "three at::linear and silu");
  add(MoeRouterFn{&moe_router}, "float32 softmax, top-k");
  add(MoeExpertsFn{&moe_experts}, "sort by expert, two at::_grouped_mm, weighted sum");
  add(CrossEntropyFn{&cross_entropy}, "chunked linear + cross-entropy, gradients in forward");
  add(MoeDispatchFn{&moe_dispatch}, "sort by expert, all-to-all of counts then rows");
  add(MoeCombineFn{&moe_combine}, "all-to-all back, weighted sum over each token's k experts");
  add(Nf4LinearFn{&nf4_linear}, "the whole weight dequantised, one at::linear");
  add(ContextAttentionFn{&context_attention},
      "at::scaled_dot_product_attention per piece of <= 512 queries, over the keys it can see");
}

}  // namespace titan::kernels::reference
