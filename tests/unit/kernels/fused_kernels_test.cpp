// The "fused" kernels against `reference`, forward and backward, on random shapes: on the CPU,
// and on CUDA where a GPU is present (reported as skipped otherwise).
//
// float32: every output and gradient within 1e-5 of reference, relative to the tensor's largest
// magnitude. bfloat16: the kernel's distance from the float32 reference is at most twice the
// distance of reference in bfloat16 from itself in float32 (plus one bfloat16 ulp of slack).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "relative_error.h"
#include "titan/kernels/reference/reference.h"
#include "titan/kernels/registry.h"

namespace titan::kernels {
namespace {

template <Op op>
OpFunctionOf<op> implementation(const std::string& name) {
  return std::get<static_cast<size_t>(op)>(kernel_registry().get(op, name).fn);
}

// False in a build without TITAN_CUDA (libtorch_cuda is not linked) and on a machine with no GPU.
bool have_cuda() { return at::hasCUDA(); }

using testing::relative_error;

// One evaluation of an op: its outputs and the gradients of its differentiable inputs.
using Outputs = std::vector<at::Tensor>;

// Runs `fn` on fresh leaves made from `inputs` (cast to `dtype` where `cast[i]`), backpropagates
// sum(output_j * probe_j) and returns the outputs followed by each input's gradient.
Outputs evaluate(const std::function<Outputs(const std::vector<at::Tensor>&)>& fn,
                 const std::vector<at::Tensor>& inputs, const std::vector<bool>& cast,
                 at::ScalarType dtype, uint64_t probe_seed) {
  std::vector<at::Tensor> leaves;
  for (size_t i = 0; i < inputs.size(); ++i) {
    at::Tensor leaf = (cast[i] ? inputs[i].to(dtype) : inputs[i]).detach().clone();
    if (leaf.is_floating_point()) leaf.requires_grad_(true);
    leaves.push_back(leaf);
  }
  Outputs outs = fn(leaves);
  at::Tensor objective = at::zeros({}, outs[0].options().dtype(at::kFloat));
  at::manual_seed(probe_seed);
  for (const at::Tensor& out : outs) {
    const at::Tensor probe = at::randn(out.sizes(), out.options().dtype(at::kFloat));
    objective = objective + (out.to(at::kFloat) * probe).sum();
  }
  objective.backward();
  Outputs result = outs;
  for (const at::Tensor& leaf : leaves)
    if (leaf.is_floating_point() && leaf.grad().defined()) result.push_back(leaf.grad());
  return result;
}

// Compares implementation `fn` with `reference_fn` on `inputs` in float32 and bfloat16.
void expect_matches_reference(
    const std::function<Outputs(const std::vector<at::Tensor>&)>& fn,
    const std::function<Outputs(const std::vector<at::Tensor>&)>& reference_fn,
    const std::vector<at::Tensor>& inputs, const std::vector<bool>& cast, const std::string& what) {
  const Outputs ref32 = evaluate(reference_fn, inputs, cast, at::kFloat, 7);
  const Outputs got32 = evaluate(fn, inputs, cast, at::kFloat, 7);
  ASSERT_EQ(got32.size(), ref32.size());
  for (size_t i = 0; i < ref32.size(); ++i) {
    ASSERT_TRUE(got32[i].defined()) << what << " float32 result " << i;
    EXPECT_EQ(got32[i].sizes(), ref32[i].sizes()) << what << " result " << i;
    EXPECT_LE(relative_error(got32[i], ref32[i]), 1e-5) << what << " float32 result " << i;
  }
  // bfloat16, from inputs that bfloat16 represents exactly (so both runs see the same values).
  std::vector<at::Tensor> rounded;
  for (size_t i = 0; i < inputs.size(); ++i)
    rounded.push_back(cast[i] ? inputs[i].to(at::kBFloat16).to(inputs[i].scalar_type())
                              : inputs[i]);
  const Outputs exact = evaluate(reference_fn, rounded, cast, at::kFloat, 7);
  const Outputs ref16 = evaluate(reference_fn, rounded, cast, at::kBFloat16, 7);
  const Outputs got16 = evaluate(fn, rounded, cast, at::kBFloat16, 7);
  for (size_t i = 0; i < exact.size(); ++i) {
    const double tolerance = 2 * relative_error(ref16[i], exact[i]) + 1.0 / 256;
    EXPECT_LE(relative_error(got16[i], exact[i]), tolerance) << what << " bfloat16 result " << i;
    EXPECT_EQ(got16[i].scalar_type(), ref16[i].scalar_type()) << what << " result " << i;
  }
}

struct MoeCase {
  int64_t tokens, hidden, inter, experts, top_k;
  enum Routing { kRandom, kUneven, kEmptyExperts } routing;
  std::string name() const {
    return "T" + std::to_string(tokens) + "_H" + std::to_string(hidden) + "_I" +
           std::to_string(inter) + "_E" + std::to_string(experts) + "_k" + std::to_string(top_k) +
           (routing == kRandom   ? ""
            : routing == kUneven ? "_uneven"
                                 : "_empty_experts");
  }
};

// Top-k experts of random logits; uneven: a strong preference for the first experts; empty
// experts: only the first top_k + 1 experts can be chosen.
at::Tensor route(const MoeCase& c, const at::TensorOptions& options) {
  at::Tensor logits = at::randn({c.tokens, c.experts});
  if (c.routing == MoeCase::kUneven) logits = logits - at::arange(c.experts) * 1.5;
  if (c.routing == MoeCase::kEmptyExperts && c.experts > c.top_k + 1)
    logits.narrow(1, c.top_k + 1, c.experts - c.top_k - 1).fill_(-1e9);
  return std::get<1>(at::topk(logits, c.top_k, -1)).to(options.device());
}

void check_moe(const MoeCase& c, at::Device device) {
  at::manual_seed(c.tokens * 131 + c.experts * 7 + c.top_k);
  const auto on = at::TensorOptions().device(device);
  const at::Tensor x = at::randn({c.tokens, c.hidden}, on);
  const at::Tensor experts = route(c, on);
  const at::Tensor weights = at::softmax(at::randn({c.tokens, c.top_k}, on), -1);
  const at::Tensor gate_up = at::randn({c.experts, 2 * c.inter, c.hidden}, on) * 0.2;
  const at::Tensor down = at::randn({c.experts, c.hidden, c.inter}, on) * 0.2;
  auto with = [&](MoeExpertsFn fn) {
    return [fn, experts](const std::vector<at::Tensor>& in) -> Outputs {
      Routing r;
      r.top_weights = in[1];
      r.top_experts = experts;
      return {fn(in[0], r, in[2], in[3])};
    };
  };
  // x and the combine weights are activations (compute dtype); the expert weights are float32
  // master weights in both runs.
  expect_matches_reference(with(implementation<Op::kMoeExperts>("fused")),
                           with(&reference::moe_experts), {x, weights, gate_up, down},
                           {true, true, false, false}, c.name());
}

void check_rms_norm(at::IntArrayRef shape, bool transposed, at::Device device) {
  at::manual_seed(shape.back() * 17 + shape.size());
  const auto on = at::TensorOptions().device(device);
  at::Tensor x = at::randn(shape, on) * 3 + 0.5;
  if (transposed) x = x.transpose(0, 1).contiguous().transpose(0, 1);  // a strided view
  const at::Tensor w = at::randn({shape.back()}, on);
  const double eps = 1e-6;
  auto with = [eps](RmsNormFn fn) {
    return
        [fn, eps](const std::vector<at::Tensor>& in) -> Outputs { return {fn(in[0], in[1], eps)}; };
  };
  std::string name = "rms_norm";
  for (int64_t d : shape) name += "_" + std::to_string(d);
  expect_matches_reference(with(implementation<Op::kRmsNorm>("fused")), with(&reference::rms_norm),
                           {x, w}, {true, false}, name + (transposed ? "_strided" : ""));
}

// ---- suites over the devices: every kernel that exists on both runs on both ----------------

class FusedKernels : public ::testing::TestWithParam<at::DeviceType> {
 protected:
  void SetUp() override {
    if (GetParam() == at::kCUDA && !have_cuda())
      GTEST_SKIP() << "no CUDA device (or a build without TITAN_CUDA)";
  }
  at::Device device() const { return at::Device(GetParam()); }
};

TEST_P(FusedKernels, MoeExpertsEqualsReference) {
  const MoeCase cases[] = {
      {1, 16, 8, 4, 1, MoeCase::kRandom},           // a single token, top-1
      {1, 32, 16, 8, 8, MoeCase::kRandom},          // a single token, top-8 (every expert)
      {7, 16, 8, 4, 2, MoeCase::kRandom},           // odd sizes
      {64, 48, 24, 8, 2, MoeCase::kUneven},         // uneven routing
      {64, 32, 16, 16, 8, MoeCase::kRandom},        // top-8
      {50, 32, 16, 8, 1, MoeCase::kEmptyExperts},   // experts with no tokens, top-1
      {40, 64, 32, 16, 8, MoeCase::kEmptyExperts},  // top-8 of 9 possible, 7 empty
      {33, 16, 8, 1, 1, MoeCase::kRandom},          // one expert
  };
  for (const MoeCase& c : cases) check_moe(c, device());
}

TEST_P(FusedKernels, RmsNormEqualsReference) {
  check_rms_norm({5, 8}, false, device());
  check_rms_norm({1, 1000}, false, device());
  check_rms_norm({3, 65, 128}, false, device());
  check_rms_norm({130, 64}, true, device());  // more rows than one weight-gradient block
  check_rms_norm({2, 4, 9, 64}, false, device());
}

TEST_P(FusedKernels, CrossEntropyEqualsReference) {
  at::manual_seed(5);
  const auto on = at::TensorOptions().device(device());
  const at::Tensor hidden = at::randn({37, 64}, on);
  const at::Tensor weight = at::randn({1000, 64}, on) * 0.1;
  at::Tensor labels = at::randint(0, 1000, {37}, on.dtype(at::kLong));
  labels.narrow(0, 0, 5).fill_(-100);  // ignored positions
  auto with = [labels](CrossEntropyFn fn) {
    return [fn, labels](const std::vector<at::Tensor>& in) -> Outputs {
      return {fn(in[0], in[1], labels, -100)};
    };
  };
  expect_matches_reference(with(implementation<Op::kCrossEntropy>("fused")),
                           with(&reference::cross_entropy), {hidden, weight}, {true, false},
                           "cross_entropy");
}

TEST_P(FusedKernels, MoeExpertsRejectsMismatchedWeights) {
  const auto on = at::TensorOptions().device(device());
  Routing r;
  r.top_experts = at::zeros({4, 2}, on.dtype(at::kLong));
  r.top_weights = at::ones({4, 2}, on);
  const at::Tensor x = at::randn({4, 16}, on);
  EXPECT_THROW(implementation<Op::kMoeExperts>("fused")(x, r, at::randn({4, 16, 16}, on),
                                                        at::randn({4, 16, 4}, on)),
               c10::Error);
}

INSTANTIATE_TEST_SUITE_P(Devices, FusedKernels, ::testing::Values(at::kCPU, at::kCUDA),
                         [](const auto& info) {
                           return std::string(info.param == at::kCPU ? "cpu" : "cuda");
                         });

// ---- CUDA-only kernels (rope, swiglu) ----------------------------------------------------

class FusedCudaKernels : public FusedKernels {};

TEST_P(FusedCudaKernels, RopeEqualsReference) {
  at::manual_seed(3);
  const auto on = at::TensorOptions().device(device());
  for (auto [b, nq, nkv, s, d] :
       std::vector<std::array<int64_t, 5>>{{2, 4, 2, 9, 16}, {1, 8, 8, 1, 64}}) {
    // q and k as the model passes them: [B, S, heads, d] transposed to [B, heads, S, d].
    const at::Tensor q = at::randn({b, s, nq, d}, on).transpose(1, 2);
    const at::Tensor k = at::randn({b, s, nkv, d}, on).transpose(1, 2);
    const at::Tensor angle = at::randn({s, d / 2}, on);
    const at::Tensor cos = at::cat({angle.cos(), angle.cos()}, -1);
    const at::Tensor sin = at::cat({angle.sin(), angle.sin()}, -1);
    auto with = [&](RopeFn fn) {
      return [fn](const std::vector<at::Tensor>& in) -> Outputs {
        const RotatedQueryKey r = fn(in[0], in[1], in[2].detach(), in[3].detach());
        return {r.q, r.k};
      };
    };
    expect_matches_reference(with(implementation<Op::kRope>("fused")), with(&reference::rope),
                             {q, k, cos, sin}, {true, true, true, true}, "rope");
  }
}

TEST_P(FusedCudaKernels, SwigluEqualsReference) {
  at::manual_seed(4);
  const auto on = at::TensorOptions().device(device());
  const at::Tensor x = at::randn({2, 7, 32}, on);
  const at::Tensor gate = at::randn({48, 32}, on) * 0.2, up = at::randn({48, 32}, on) * 0.2;
  const at::Tensor down = at::randn({32, 48}, on) * 0.2;
  auto with = [](SwigluFn fn) {
    return [fn](const std::vector<at::Tensor>& in) -> Outputs {
      return {fn(in[0], in[1], in[2], in[3])};
    };
  };
  expect_matches_reference(with(implementation<Op::kSwiglu>("fused")), with(&reference::swiglu),
                           {x, gate, up, down}, {true, false, false, false}, "swiglu");
}

INSTANTIATE_TEST_SUITE_P(Devices, FusedCudaKernels, ::testing::Values(at::kCUDA),
                         [](const auto&) { return std::string("cuda"); });

// ---- registration ----------------------------------------------------------------------------

TEST(FusedKernelRegistration, SupportsWhatItImplements) {
  const KernelRegistry& registry = kernel_registry();
  for (Op op : {Op::kRmsNorm, Op::kMoeExperts, Op::kCrossEntropy}) {
    EXPECT_TRUE(registry.get(op, "fused").supports(at::kCPU, at::kFloat)) << op_name(op);
    EXPECT_TRUE(registry.get(op, "fused").supports(at::kCPU, at::kBFloat16)) << op_name(op);
  }
  for (Op op : {Op::kRope, Op::kSwiglu})
    EXPECT_FALSE(registry.get(op, "fused").supports(at::kCPU, at::kFloat)) << op_name(op);
  EXPECT_FALSE(registry.has(Op::kAttention, "fused"));
  EXPECT_FALSE(registry.has(Op::kMoeRouter, "fused"));
}

}  // namespace
}  // namespace titan::kernels
