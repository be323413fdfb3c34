// context_attention (ops.h) through ATen's scaled_dot_product_attention, a part of the queries
// at a time. The queries are cut into pieces of consecutive global indices, at most
// kRowsPerPiece each; a piece [g0, g1) can see only keys [first, g1), where `first` is 0 for
// causal rows and, for packed documents, the first token of the earliest document that a row's
// query g0 belongs to. Each piece attends to that key range with a boolean mask of
// [B or 1, 1, g1 - g0, g1 - first] (causal, and same document), so memory never holds an
// [Sq, S] mask and rows of many short documents cost about what the documents do.
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "titan/common/error.h"
#include "titan/kernels/reference/reference.h"

namespace titan::kernels::reference {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Query rows per SDPA call: a piece's mask and scores stay small (512 x S booleans).
constexpr int64_t kRowsPerPiece = 512;

struct Piece {
  int64_t row = 0;        // first local query row
  int64_t rows = 0;       // query rows (global indices global .. global + rows - 1)
  int64_t global = 0;     // the first row's global index
  int64_t first_key = 0;  // keys [first_key, global + rows) are the ones it may see
};

// Runs of consecutive global indices, cut into pieces of at most kRowsPerPiece rows.
std::vector<Piece> pieces_of(const at::Tensor& query_index) {
  const at::Tensor idx = query_index.to(at::kCPU, at::kLong).contiguous();
  const int64_t* g = idx.const_data_ptr<int64_t>();
  const int64_t n = idx.numel();
  std::vector<Piece> out;
  for (int64_t i = 0; i < n;) {
    int64_t end = i + 1;
    while (end < n && end - i < kRowsPerPiece && g[end] == g[end - 1] + 1) ++end;
    out.push_back({i, end - i, g[i], 0});
    i = end;
  }
  return out;
}

// The boolean mask of a piece: causal in global places and, with document ids [B, S], within a
// document. [rows, keys] (or [B, rows, keys] with documents).
at::Tensor piece_mask(const Piece& p, const at::Tensor& ids, const at::Device& device) {
  const bool documents = ids.defined() && ids.numel() > 0;
  const int64_t end = p.global + p.rows, keys = end - p.first_key;
  const auto long_opts = at::TensorOptions(device).dtype(at::kLong);
  const at::Tensor query_at = at::arange(p.global, end, long_opts);
  const at::Tensor key_at = at::arange(p.first_key, end, long_opts);
  at::Tensor mask = key_at.unsqueeze(0) <= query_at.unsqueeze(1);
  if (documents) {
    const at::Tensor qd = ids.narrow(1, p.global, p.rows).unsqueeze(2);
    const at::Tensor kd = ids.narrow(1, p.first_key, keys).unsqueeze(1);
    mask = (qd == kd).logical_and_(mask);
  }
  return documents ? mask.unsqueeze(1) : mask.view({1, 1, p.rows, keys});
}

// The additive float mask the CPU flash kernel takes (0 where seen, -inf elsewhere).
at::Tensor additive(const at::Tensor& mask, at::ScalarType dtype) {
  return at::zeros(mask.sizes(), at::TensorOptions(mask.device()).dtype(dtype))
      .masked_fill_(mask.logical_not(), -std::numeric_limits<double>::infinity());
}

// One piece on the CPU through the flash kernel, keeping for backward only what it cannot
// rebuild: SDPA's autograd would keep each piece's [rows, keys] float mask, which over the
// pieces grows as (S/cp) x S a layer; here the mask is made again in backward. Grouped keys and
// values are expanded to the query heads for the kernel and their gradients summed back.
struct CpuPieceFunction : public torch::autograd::Function<CpuPieceFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k,
                            const at::Tensor& v, double scale, int64_t global, int64_t first_key,
                            const at::Tensor& ids) {
    const Piece p{0, q.size(2), global, first_key};
    const int64_t group = q.size(1) / k.size(1);
    const at::Tensor mask = additive(piece_mask(p, ids, q.device()), q.scalar_type());
    auto [out, lse] = at::_scaled_dot_product_flash_attention_for_cpu(
        q, k.repeat_interleave(group, 1), v.repeat_interleave(group, 1), 0.0, false, mask, scale);
    ctx->save_for_backward({q, k, v, out, lse, ids});
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["global"] = global;
    ctx->saved_data["first_key"] = first_key;
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &out = saved[3], &lse = saved[4],
                     &ids = saved[5];
    const Piece p{0, q.size(2), ctx->saved_data["global"].toInt(),
                  ctx->saved_data["first_key"].toInt()};
    const double scale = ctx->saved_data["scale"].toDouble();
    const int64_t group = q.size(1) / k.size(1);
    const at::Tensor mask = additive(piece_mask(p, ids, q.device()), q.scalar_type());
    auto [dq, dk, dv] = at::_scaled_dot_product_flash_attention_for_cpu_backward(
        grads[0].contiguous(), q, k.repeat_interleave(group, 1), v.repeat_interleave(group, 1), out,
        lse, 0.0, false, mask, scale);
    auto fold = [&](const at::Tensor& g) {  // [B, nq, keys, d] -> [B, nkv, keys, d]
      return group == 1 ? g : g.unflatten(1, {k.size(1), group}).sum(2);
    };
    return {dq, fold(dk), fold(dv), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor context_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                             double scale, const at::Tensor& query_index,
                             const at::Tensor& document_ids) {
  const int64_t B = q.size(0), Sq = q.size(2), S = k.size(2);
  TITAN_CHECK(q.dim() == 4 && k.dim() == 4 && v.sizes() == k.sizes() && k.size(0) == B &&
                  query_index.dim() == 1 && query_index.size(0) == Sq,
              "context_attention: q [B, nq, Sq, d], k/v [B, nkv, S, d] and query_index [Sq] "
              "expected, got q ",
              q.sizes(), ", k ", k.sizes(), ", v ", v.sizes(), ", query_index ",
              query_index.sizes());
  std::vector<Piece> pieces = pieces_of(query_index);
  for (const Piece& p : pieces)
    TITAN_CHECK(p.global >= 0 && p.global + p.rows <= S, "context_attention: query indices ",
                p.global, "..", p.global + p.rows - 1, " outside the sequence of ", S, " keys");
  const bool documents = document_ids.defined();
  at::Tensor ids;
  if (documents) {
    TITAN_CHECK(document_ids.dim() == 2 && document_ids.size(0) == B && document_ids.size(1) == S,
                "context_attention: document ids [B, S] = [", B, ", ", S, "] expected, got ",
                document_ids.sizes());
    ids = document_ids.to(q.device(), at::kLong);
    // The first token of each token's document (documents are runs of equal ids in a row):
    // the running maximum of the indices where a run starts. One host copy of the pieces'
    // first queries' values, the earliest over the rows.
    const auto opts = at::TensorOptions(q.device()).dtype(at::kLong);
    const at::Tensor index = at::arange(S, opts).expand({B, S});
    at::Tensor starts = at::ones({B, S}, opts.dtype(at::kBool));
    if (S > 1) starts.slice(1, 1).copy_(ids.slice(1, 1) != ids.slice(1, 0, S - 1));
    const at::Tensor first = std::get<0>(at::cummax(index * starts, 1));
    std::vector<int64_t> globals;
    for (const Piece& p : pieces) globals.push_back(p.global);
    const at::Tensor at_pieces =
        std::get<0>(first.index_select(1, at::tensor(globals, at::kLong).to(q.device())).min(0))
            .to(at::kCPU)
            .contiguous();
    const int64_t* f = at_pieces.const_data_ptr<int64_t>();
    for (size_t i = 0; i < pieces.size(); ++i) pieces[i].first_key = f[i];
  }
  const bool gqa = q.size(1) != k.size(1);
  // The CPU flash kernel with a mask rebuilt in backward (CpuPieceFunction); elsewhere SDPA.
  const bool cpu =
      q.device().is_cpu() && (q.scalar_type() == at::kFloat || q.scalar_type() == at::kBFloat16 ||
                              q.scalar_type() == at::kDouble);
  const at::Tensor no_ids = at::empty({0}, at::TensorOptions(q.device()).dtype(at::kLong));
  std::vector<at::Tensor> outputs;
  outputs.reserve(pieces.size());
  for (const Piece& p : pieces) {
    const int64_t keys = p.global + p.rows - p.first_key;
    const at::Tensor qp = q.narrow(2, p.row, p.rows);
    const at::Tensor kp = k.narrow(2, p.first_key, keys);
    const at::Tensor vp = v.narrow(2, p.first_key, keys);
    if (cpu) {
      // Autograd takes no undefined tensor: causal rows pass an empty one.
      outputs.push_back(CpuPieceFunction::apply(qp, kp, vp, scale, p.global, p.first_key,
                                                ids.defined() ? ids : no_ids));
      continue;
    }
    outputs.push_back(at::scaled_dot_product_attention(qp, kp, vp, piece_mask(p, ids, q.device()),
                                                       0.0, /*is_causal=*/false, scale, gqa));
  }
  return outputs.size() == 1 ? outputs[0] : at::cat(outputs, 2);
}

}  // namespace titan::kernels::reference
