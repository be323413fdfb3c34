// context_attention (ops.h) against one process's attention op on the whole sequence: the
// queries of each simulated context-parallel rank (head-tail chunks, contiguous pieces, a long
// run that the implementation cuts into several pieces) attend to every key, given in order
// (what the gather over cp ranks hands it), and must give those rows of the whole sequence's
// output; their gradients, summed over the ranks for the keys and values (what the gather's
// reduce-scatter does), must give the whole sequence's gradients. Causal rows and packed rows
// whose documents cross the chunk boundaries and differ between the rows of the batch.
#include <gtest/gtest.h>

#include "../relative_error.h"
#include "titan/kernels/registry.h"

namespace titan::kernels {
namespace {

using titan::testing::relative_error;

template <Op op>
OpFunctionOf<op> reference_of() {
  return std::get<static_cast<size_t>(op)>(kernel_registry().get(op, "reference").fn);
}

// The global indices each of `cp` ranks holds: head-tail (chunks r and 2cp-1-r) or contiguous.
std::vector<at::Tensor> rank_indices(int64_t S, int64_t cp, bool headtail) {
  std::vector<at::Tensor> out;
  for (int64_t r = 0; r < cp; ++r) {
    if (!headtail) {
      out.push_back(at::arange(r * S / cp, (r + 1) * S / cp, at::kLong));
      continue;
    }
    const int64_t c = S / (2 * cp);
    out.push_back(at::cat({at::arange(r * c, (r + 1) * c, at::kLong),
                           at::arange((2 * cp - 1 - r) * c, (2 * cp - r) * c, at::kLong)}));
  }
  return out;
}

// Documents of random lengths (1..max_len), different in each row: int64 [B, S].
at::Tensor random_documents(int64_t B, int64_t S, int64_t max_len) {
  at::Tensor ids = at::empty({B, S}, at::kLong);
  for (int64_t b = 0; b < B; ++b) {
    int64_t doc = 0, left = 0;
    for (int64_t t = 0; t < S; ++t) {
      if (left == 0) {
        left = at::randint(1, max_len + 1, {1}, at::kLong).item<int64_t>();
        if (t > 0) ++doc;
      }
      ids[b][t] = doc;
      --left;
    }
  }
  return ids;
}

struct Case {
  const char* name;
  int64_t S, cp;
  bool headtail;
  int64_t max_document;  // 0: causal rows
};

class ContextAttention : public ::testing::TestWithParam<Case> {};

TEST_P(ContextAttention, RanksTogetherEqualTheWholeSequence) {
  const Case c = GetParam();
  at::manual_seed(7);
  const int64_t B = 2, nq = 4, nkv = 2, d = 8;
  const double scale = 0.3;
  const at::Tensor q0 = at::randn({B, nq, c.S, d}), k0 = at::randn({B, nkv, c.S, d});
  const at::Tensor v0 = at::randn({B, nkv, c.S, d}), probe = at::randn({B, nq, c.S, d});
  const at::Tensor ids =
      c.max_document > 0 ? random_documents(B, c.S, c.max_document) : at::Tensor();
  if (ids.defined()) {
    ASSERT_GT(ids.max().item<int64_t>(), 2);
  }

  // One process: the attention op on the whole sequence.
  const at::Tensor q = q0.clone().requires_grad_(true), k = k0.clone().requires_grad_(true);
  const at::Tensor v = v0.clone().requires_grad_(true);
  const at::Tensor whole = reference_of<Op::kAttention>()(q, k, v, scale, 0, ids);
  (whole * probe).sum().backward();

  const ContextAttentionFn attend = reference_of<Op::kContextAttention>();
  at::Tensor out = at::zeros_like(q0), dq = at::zeros_like(q0);
  at::Tensor dk = at::zeros_like(k0), dv = at::zeros_like(v0);
  for (const at::Tensor& mine : rank_indices(c.S, c.cp, c.headtail)) {
    const at::Tensor ql = q0.index_select(2, mine).requires_grad_(true);
    const at::Tensor kg = k0.clone().requires_grad_(true), vg = v0.clone().requires_grad_(true);
    const at::Tensor o = attend(ql, kg, vg, scale, mine, ids);
    ASSERT_EQ(o.sizes(), ql.sizes());
    (o * probe.index_select(2, mine)).sum().backward();
    out.index_copy_(2, mine, o.detach());
    dq.index_copy_(2, mine, ql.grad());
    dk += kg.grad();
    dv += vg.grad();
  }
  EXPECT_LT(relative_error(out, whole), 1e-5);
  EXPECT_LT(relative_error(dq, q.grad()), 1e-5);
  EXPECT_LT(relative_error(dk, k.grad()), 1e-5);
  EXPECT_LT(relative_error(dv, v.grad()), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, ContextAttention,
    ::testing::Values(Case{"causal_headtail_cp2", 64, 2, true, 0},
                      Case{"causal_none_cp2", 64, 2, false, 0},
                      Case{"causal_headtail_cp4", 64, 4, true, 0},
                      Case{"documents_headtail_cp2", 64, 2, true, 11},
                      Case{"documents_none_cp4", 64, 4, false, 11},
                      // Runs longer than a piece (512 rows): cut into several, and documents
                      // that start far before a piece's first query.
                      Case{"causal_long_runs", 2400, 2, true, 0},
                      Case{"documents_long_runs", 2400, 2, false, 700}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

TEST(ContextAttention, WrongShapesAreOneClearError) {
  const ContextAttentionFn attend = reference_of<Op::kContextAttention>();
  const at::Tensor q = at::randn({1, 2, 4, 8}), k = at::randn({1, 1, 8, 8});
  try {
    attend(q, k, k, 1.0, at::arange(8, 12, at::kLong), {});
    FAIL() << "indices past the sequence were accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("outside the sequence of 8 keys"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace titan::kernels
