#include "titan/models/common/attention.h"

#include <cmath>

#include "titan/common/error.h"
#include "titan/kernels/override_resolver.h"
#include "titan/models/common/activation_checkpoint.h"

namespace titan::models {

using kernels::Op;

Attention::Attention(const AttentionConfig& c, const std::string& path,
                     const at::TensorOptions& options, kernels::OverrideResolver& overrides)
    : config_(c) {
  const int64_t H = c.hidden_size, d = c.head_dim;
  const int64_t q_out = c.num_heads * d, kv_out = c.num_kv_heads * d;
  auto make = [&](std::vector<int64_t> shape) { return at::empty(shape, options); };
  q_proj_.weight = make({q_out, H});
  k_proj_.weight = make({kv_out, H});
  v_proj_.weight = make({kv_out, H});
  o_proj_.weight = make({H, q_out});
  if (c.bias) {
    q_proj_.bias = make({q_out});
    k_proj_.bias = make({kv_out});
    v_proj_.bias = make({kv_out});
    o_proj_.bias = make({H});
  }
  const std::string site = path + ".attention";
  if (c.qk_norm) {
    q_norm_ = {make({d}), c.norm_eps, overrides.function<Op::kRmsNorm>(site + ".q_norm")};
    k_norm_ = {make({d}), c.norm_eps, overrides.function<Op::kRmsNorm>(site + ".k_norm")};
  }
  rope_ = overrides.function<Op::kRope>(site);
  attention_ = overrides.function<Op::kAttention>(site);
  context_attention_ = overrides.function<Op::kContextAttention>(site);
  // QLoRA's frozen projections read their NF4 weights here.
  for (auto& [name, linear] : projections())
    linear->nf4_linear = overrides.function<Op::kNf4Linear>(site + "." + name.substr(10));
}

std::vector<std::pair<std::string, Linear*>> Attention::projections() {
  return {{"self_attn.q_proj", &q_proj_},
          {"self_attn.k_proj", &k_proj_},
          {"self_attn.v_proj", &v_proj_},
          {"self_attn.o_proj", &o_proj_}};
}

void Attention::visit_parameters(const std::string& prefix, const ParameterVisitor& f) {
  q_proj_.visit(prefix + "q_proj", f);
  k_proj_.visit(prefix + "k_proj", f);
  v_proj_.visit(prefix + "v_proj", f);
  o_proj_.visit(prefix + "o_proj", f);
  if (config_.qk_norm) {
    f(prefix + "q_norm.weight", q_norm_.weight);
    f(prefix + "k_norm.weight", k_norm_.weight);
  }
}

at::Tensor Attention::forward(const at::Tensor& normed, const RopeTables& rope,
                              const at::Tensor& positions, const at::Tensor& document_ids,
                              at::Tensor* keys, at::Tensor* values) const {
  // Tensor parallelism: the column-parallel projections see every token (their local heads).
  const at::Tensor x = tp_.active() ? tp_.enter(normed) : normed;
  const int64_t B = x.size(0), S = x.size(1), d = config_.head_dim;
  auto heads = [&](const Linear& l) { return l.forward(x).view({B, S, -1, d}); };
  const at::Tensor q_heads = config_.qk_norm ? q_norm_(heads(q_proj_)) : heads(q_proj_);
  const at::Tensor k_heads = config_.qk_norm ? k_norm_(heads(k_proj_)) : heads(k_proj_);
  const kernels::RopeFn rope_fn = rope_;
  const at::Tensor cos = rope.cos, sin = rope.sin;
  const Tensors rotated = recompute_if_selective(
      [rope_fn, cos, sin](const Tensors& in) {
        kernels::RotatedQueryKey r = rope_fn(in[0], in[1], cos, sin);
        return Tensors{r.q, r.k};
      },
      {q_heads.transpose(1, 2), k_heads.transpose(1, 2)}, {});
  const at::Tensor& q = rotated[0];
  at::Tensor k = rotated[1];
  at::Tensor v = heads(v_proj_).transpose(1, 2);
  int64_t past = 0;
  if (keys != nullptr) {
    if (keys->defined()) {
      past = keys->size(2);
      k = at::cat({*keys, k}, 2);
      v = at::cat({*values, v}, 2);
    }
    *keys = k;
    *values = v;
  }
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  const at::Tensor attended = cp_ && keys == nullptr
                                  ? cp_(context_attention_, q, k, v, scale, document_ids)
                                  : attention_(q, k, v, scale, past, document_ids);
  const at::Tensor o = attended.transpose(1, 2).reshape({B, S, -1});
  if (!tp_.active()) return o_proj_.forward(o);
  // Row-parallel: this rank's heads' share (and its adapter's, whose A holds this rank's
  // columns), summed over tp before the bias.
  const at::Tensor out = tp_.exit(o_proj_.project(o));
  return o_proj_.bias.defined() ? out + o_proj_.bias.to(out.scalar_type()) : out;
}

}  // namespace titan::models
