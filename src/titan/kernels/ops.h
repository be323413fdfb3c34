// The overridable ops: their names and the signature every implementation of each must have.
//
// A model calls these ops through function pointers chosen once, when it is built, from the
// kernel registry (registry.h) and the `override.imports` entries of the config
// (override_resolver.h); `reference` is the plain ATen implementation of each. This header is
// part of the plugin API (plugin_api.h): a kernel library compiled against it registers
// functions of exactly these types, so any change here bumps kKernelAbiVersion.
//
// Common contract: activations arrive in the compute dtype; weights may be in another floating
// dtype (float32 master weights) and are cast to the activations' dtype by the implementation,
// so that gradients reach the master copies. Every implementation supports autograd (forward
// and backward) for the inputs that require grad. See docs/kernels.md.
#pragma once

#include <ATen/ATen.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>
#include <variant>
#include <vector>

namespace titan::kernels {

enum class Op : int {
  kRmsNorm = 0,
  kRope,
  kAttention,
  kSwiglu,
  kMoeRouter,
  kMoeExperts,
  kCrossEntropy,
  kMoeDispatch,
  kMoeCombine,
  kNf4Linear,
  kContextAttention,
};
inline constexpr size_t kNumOps = 11;

// Config and log names, indexed by Op.
inline constexpr std::array<std::string_view, kNumOps> kOpNames = {
    "rms_norm",      "rope",         "attention",   "swiglu",     "moe_router",       "moe_experts",
    "cross_entropy", "moe_dispatch", "moe_combine", "nf4_linear", "context_attention"};
inline std::string_view op_name(Op op) { return kOpNames[static_cast<size_t>(op)]; }

// The router's decision for each token (moe_router's output, moe_experts' input).
struct Routing {
  at::Tensor logits;       // [T, E] router logits in the activations' dtype (for the aux loss)
  at::Tensor top_weights;  // [T, k] combine weights in the activations' dtype
  at::Tensor top_experts;  // [T, k] int64 expert ids, best first
};

// How an expert-parallel MoE layer reaches the other ranks of its expert group (expert
// parallelism, docs/distributed.md): `size` ranks, each holding num_experts / size experts, this
// one the `rank`-th block of them. The functions are the group's collectives; on one rank they
// are never called.
struct ExpertGroup {
  int64_t size = 1;
  int64_t rank = 0;
  // Differentiable all-to-all of rows: `rows` [sum(send), ...] sends send[m] consecutive rows to
  // member m and returns [sum(receive), ...], receive[m] rows from member m, in member order.
  // Its backward sends the gradients back the same way.
  std::function<at::Tensor(const at::Tensor& rows, const std::vector<int64_t>& receive,
                           const std::vector<int64_t>& send)>
      all_to_all;
  // Not differentiable: `counts` int64 [size * n], n entries for each member, exchanged so
  // that entry block m of the result is what member m sent this rank.
  std::function<at::Tensor(const at::Tensor& counts)> exchange_counts;
};

// The tokens an expert group's rank computes, after moe_dispatch: what moe_experts runs on
// (its local experts, each row routed to one of them with weight 1) and what moe_combine needs
// to send the results back.
struct DispatchedTokens {
  at::Tensor rows;            // [R, H] grouped by local expert
  Routing local_routing;      // top_experts [R, 1] local expert ids, top_weights [R, 1] ones
  at::Tensor sent_order;      // [T*k] int64: the (token * k + slot) of each row as sent
  at::Tensor received_order;  // [R] int64: the received row each row of `rows` is
  std::vector<int64_t> sent, received;  // rows to / from each member
};

// A frozen weight [rows, cols] in 4-bit NormalFloat (NF4, QLoRA; kernels/nf4.h), laid out as
// bitsandbytes lays it out: the row-major weight cut into blocks of `blocksize` consecutive
// elements (the last may be shorter), each element the index of the nearest of 16 code values
// after dividing by its block's absolute maximum; two indices a byte, the earlier element in the
// high nibble.
struct Nf4Weight {
  at::Tensor packed;  // uint8 [ceil(rows * cols / 2)]
  at::Tensor absmax;  // float32 [ceil(rows * cols / blocksize)]
  int64_t rows = 0, cols = 0;
  int64_t blocksize = 64;
};

// Query and key after rotary embedding.
struct RotatedQueryKey {
  at::Tensor q;
  at::Tensor k;
};

// rms_norm: x [..., D], weight [D] -> weight * x / sqrt(mean(x^2) + eps) over the last dim,
// statistics in float32, the normalised value rounded to x's dtype before the multiply.
using RmsNormFn = at::Tensor (*)(const at::Tensor& x, const at::Tensor& weight, double eps);

// rope: q [B, nq, S, d], k [B, nkv, S, d], cos/sin [S, d] (every row at positions 0..S-1), or
// [B, 1, S, d] (each row's own positions: packed documents whose positions restart at 0), in the
// half-split layout and the activations' dtype -> q*cos + rotate_half(q)*sin and the same for k.
using RopeFn = RotatedQueryKey (*)(const at::Tensor& q, const at::Tensor& k, const at::Tensor& cos,
                                   const at::Tensor& sin);

// attention: causal grouped-query attention, q [B, nq, S, d], k/v [B, nkv, past + S, d],
// softmax(q k^T * scale) v; query i sees keys 0..past+i (past > 0 only when decoding with a KV
// cache). With `document_ids` defined (int64 [B, S], past == 0: rows packed from several
// documents, training.document_masking) attention is block-causal: query i sees the keys j <= i
// of its own document only (document_ids[b, j] == document_ids[b, i]). Returns [B, nq, S, d].
using AttentionFn = at::Tensor (*)(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                   double scale, int64_t past, const at::Tensor& document_ids);

// context_attention: attention of one context-parallel rank's queries against the keys and values
// of the whole sequence (docs/distributed.md, "Context parallelism"). q [B, nq, Sq, d] are the
// queries of the tokens at global indices `query_index` (int64 [Sq] on the CPU, the same for
// every row; ascending runs, such as head-tail chunks); k/v [B, nkv, S, d] hold every token of
// the sequence, in order. Query i sees key j <= query_index[i] and, with `document_ids` defined
// (int64 [B, S] of the whole rows: packed documents), only the keys of its own document.
// Returns [B, nq, Sq, d], softmax(q k^T * scale) v over the keys each query sees. An
// implementation works on a part of the queries at a time, against only the keys that part can
// see: it never builds an [Sq, S] mask.
using ContextAttentionFn = at::Tensor (*)(const at::Tensor& q, const at::Tensor& k,
                                          const at::Tensor& v, double scale,
                                          const at::Tensor& query_index,
                                          const at::Tensor& document_ids);

// swiglu: the feed-forward down(silu(gate(x)) * up(x)); weights in nn.Linear layout [out, in].
using SwigluFn = at::Tensor (*)(const at::Tensor& x, const at::Tensor& gate_proj,
                                const at::Tensor& up_proj, const at::Tensor& down_proj);

// moe_router: x [T, H], router weight [E, H] -> softmax (float32) top-k routing; with
// `expert_bias` defined ([E], float32) the bias is added for the choice only; with
// `norm_topk_prob` the k weights are renormalised to sum to one.
using MoeRouterFn = Routing (*)(const at::Tensor& x, const at::Tensor& router_weight, int64_t top_k,
                                bool norm_topk_prob, const at::Tensor& expert_bias);

// moe_experts: x [T, H], gate_up [E, 2*Im, H] (gate rows first), down [E, H, Im] -> [T, H], the
// sum over each token's k experts of weight * down(silu(gate(x)) * up(x)).
using MoeExpertsFn = at::Tensor (*)(const at::Tensor& x, const Routing& routing,
                                    const at::Tensor& gate_up, const at::Tensor& down);

// cross_entropy: hidden [N, H], head weight [V, H], labels [N] int64 -> the float32 scalar sum
// over labels != ignore_index of the cross-entropy of hidden @ weight^T (the head and the loss
// in one op, so that an implementation need never materialise the [N, V] logits).
using CrossEntropyFn = at::Tensor (*)(const at::Tensor& hidden, const at::Tensor& weight,
                                      const at::Tensor& labels, int64_t ignore_index);

// moe_dispatch: x [T, H] and its routing over `num_experts` experts -> the rows each token's k
// experts need, sent to the rank of `group` that holds them (with one rank: kept here), grouped
// by local expert. Differentiable with respect to x.
using MoeDispatchFn = DispatchedTokens (*)(const at::Tensor& x, const Routing& routing,
                                           int64_t num_experts, const ExpertGroup& group);
// moe_combine: the local experts' outputs [R, H] (rows as moe_dispatch grouped them) -> [T, H]:
// each row sent back to the token it came from and the sum over each token's k experts of
// top_weight * output. Differentiable with respect to both.
using MoeCombineFn = at::Tensor (*)(const at::Tensor& expert_rows,
                                    const DispatchedTokens& dispatched, const Routing& routing,
                                    const ExpertGroup& group);

// nf4_linear: x [..., cols] -> x @ W^T [..., rows] in x's dtype, W the dequantised weight (each
// element its code value times its block's absmax, in float32, rounded to x's dtype).
// Differentiable with respect to x only: the weight is frozen (QLoRA's base weights). An
// implementation dequantises a part of W at a time, never keeping the whole of it.
using Nf4LinearFn = at::Tensor (*)(const at::Tensor& x, const Nf4Weight& weight);

// Any op's function; the alternative's index is the Op's value.
// The alternatives' types are all distinct, so a function pointer converts to it unambiguously.
using OpFunction =
    std::variant<RmsNormFn, RopeFn, AttentionFn, SwigluFn, MoeRouterFn, MoeExpertsFn,
                 CrossEntropyFn, MoeDispatchFn, MoeCombineFn, Nf4LinearFn, ContextAttentionFn>;
static_assert(std::variant_size_v<OpFunction> == kNumOps);

template <Op op>
using OpFunctionOf = std::variant_alternative_t<static_cast<size_t>(op), OpFunction>;

inline Op op_of(const OpFunction& fn) { return static_cast<Op>(fn.index()); }

// Whether an implementation runs with activations of `dtype` on `device`.
using SupportsFn = bool (*)(at::DeviceType device, at::ScalarType dtype);

}  // namespace titan::kernels
