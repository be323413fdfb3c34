// The fused CPU cross-entropy against `reference` (chunked logsumexp in ATen ops): the loss and
// the gradients of hidden and weight in float32 within 1e-6 relative, the logits' own gradient
// (an identity head makes hidden the logits), bfloat16 within reference's own bfloat16 error,
// the awkward shapes (a vocabulary that is not a multiple of the vector width, a chunk whose
// labels are all ignored, one row), and bitwise the same results at 1 and 2 threads.
#include <gtest/gtest.h>

#include <ATen/Parallel.h>

#include <string>

#include "relative_error.h"
#include "titan/kernels/cpu/cpu_kernels.h"
#include "titan/kernels/reference/reference.h"

namespace titan::kernels {
namespace {

constexpr int64_t kIgnore = -100;

using testing::relative_error;

struct Result {
  at::Tensor loss, grad_hidden, grad_weight;
};

// loss = fn(hidden, weight, labels); backward of 0.37 * loss (a gradient other than 1).
template <typename Fn>
Result run(Fn fn, const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& labels,
           at::ScalarType dtype) {
  at::Tensor h = hidden.to(dtype).detach().requires_grad_(true);
  at::Tensor w = weight.detach().clone().requires_grad_(true);  // float32 master weights
  at::Tensor loss = fn(h, w, labels);
  (loss * 0.37).backward();
  return {loss.detach(), h.grad(), w.grad()};
}

Result fused(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& labels,
             at::ScalarType dtype, int64_t chunk_rows) {
  return run(
      [chunk_rows](const at::Tensor& h, const at::Tensor& w, const at::Tensor& y) {
        return cpu::cross_entropy_chunked(h, w, y, kIgnore, chunk_rows);
      },
      hidden, weight, labels, dtype);
}

Result reference_result(const at::Tensor& hidden, const at::Tensor& weight,
                        const at::Tensor& labels, at::ScalarType dtype) {
  return run(
      [](const at::Tensor& h, const at::Tensor& w, const at::Tensor& y) {
        return reference::linear_cross_entropy_sum(h, w, y, kIgnore, /*chunk_rows=*/0);
      },
      hidden, weight, labels, dtype);
}

struct Case {
  std::string name;
  int64_t rows, hidden, vocab, chunk_rows;
  int64_t ignored_begin = 0, ignored_end = 0;  // rows whose label is ignore_index
};

struct Inputs {
  at::Tensor hidden, weight, labels;
};

Inputs make_inputs(const Case& c) {
  at::manual_seed(c.rows * 1009 + c.vocab);
  Inputs in;
  in.hidden = at::randn({c.rows, c.hidden});
  in.weight = at::randn({c.vocab, c.hidden}) * 0.3;
  in.labels = at::randint(0, c.vocab, {c.rows}, at::TensorOptions(at::kLong));
  if (c.ignored_end > c.ignored_begin)
    in.labels.narrow(0, c.ignored_begin, c.ignored_end - c.ignored_begin).fill_(kIgnore);
  return in;
}

void expect_close(const Result& got, const Result& want, double tolerance,
                  const std::string& what) {
  EXPECT_LE(relative_error(got.loss, want.loss), tolerance) << what << " loss";
  EXPECT_LE(relative_error(got.grad_hidden, want.grad_hidden), tolerance) << what << " dhidden";
  EXPECT_LE(relative_error(got.grad_weight, want.grad_weight), tolerance) << what << " dweight";
}

const Case kCases[] = {
    {"vocab_1000_some_ignored", 37, 64, 1000, 0, 0, 5},
    {"vocab_not_a_multiple_of_16", 20, 32, 1003, 0},
    {"vocab_below_the_vector_width", 6, 16, 13, 0},
    {"one_row", 1, 32, 517, 0},
    {"a_chunk_all_ignored", 24, 16, 333, 8, 8, 16},
    {"uneven_last_chunk", 21, 16, 259, 8, 20, 21},
    {"every_label_ignored", 6, 8, 50, 0, 0, 6},
};

TEST(CpuCrossEntropy, Float32EqualsReference) {
  for (const Case& c : kCases) {
    const Inputs in = make_inputs(c);
    const Result want = reference_result(in.hidden, in.weight, in.labels, at::kFloat);
    const Result got = fused(in.hidden, in.weight, in.labels, at::kFloat, c.chunk_rows);
    EXPECT_EQ(got.loss.scalar_type(), at::kFloat);
    EXPECT_EQ(got.grad_hidden.sizes(), want.grad_hidden.sizes());
    EXPECT_EQ(got.grad_weight.sizes(), want.grad_weight.sizes());
    expect_close(got, want, 1e-6, c.name);
    if (c.ignored_begin == 0 && c.ignored_end == c.rows) {
      EXPECT_EQ(got.loss.item<float>(), 0.0f) << c.name;
      EXPECT_EQ(got.grad_weight.abs().max().item<float>(), 0.0f) << c.name;
    }
  }
}

// With the identity as the head, hidden is the logits and its gradient is the logits' gradient
// (softmax - one_hot, zero on ignored rows), checked against reference and against ATen's
// float64 cross-entropy.
TEST(CpuCrossEntropy, LogitGradientsEqualReference) {
  for (const int64_t vocab : {67, 16, 1}) {
    at::manual_seed(vocab);
    const at::Tensor logits = at::randn({9, vocab}) * 4;
    const at::Tensor eye = at::eye(vocab);
    at::Tensor labels = at::randint(0, vocab, {9}, at::TensorOptions(at::kLong));
    labels[3] = kIgnore;
    const Result got = fused(logits, eye, labels, at::kFloat, 0);
    const Result want = reference_result(logits, eye, labels, at::kFloat);
    expect_close(got, want, 1e-6, "identity head, vocab " + std::to_string(vocab));
    at::Tensor x64 = logits.to(at::kDouble).requires_grad_(true);
    at::Tensor loss64 = at::cross_entropy_loss(x64, labels, {}, at::Reduction::Sum, kIgnore);
    (loss64 * 0.37).backward();
    EXPECT_LE(relative_error(got.loss, loss64), 1e-6) << vocab;
    EXPECT_LE(relative_error(got.grad_hidden, x64.grad()), 1e-6) << vocab;
  }
}

// bfloat16 activations: the kernel's distance from the float32 result is at most twice
// reference's own bfloat16 distance from it (plus one bfloat16 ulp), as for the other kernels.
TEST(CpuCrossEntropy, BFloat16WithinReferenceError) {
  for (const Case& c : kCases) {
    Inputs in = make_inputs(c);
    in.hidden = in.hidden.to(at::kBFloat16).to(at::kFloat);  // exactly representable inputs
    in.weight = in.weight.to(at::kBFloat16).to(at::kFloat);
    const Result exact = reference_result(in.hidden, in.weight, in.labels, at::kFloat);
    const Result ref16 = reference_result(in.hidden, in.weight, in.labels, at::kBFloat16);
    const Result got = fused(in.hidden, in.weight, in.labels, at::kBFloat16, c.chunk_rows);
    EXPECT_EQ(got.grad_hidden.scalar_type(), at::kBFloat16) << c.name;
    EXPECT_EQ(got.grad_weight.scalar_type(), at::kFloat) << c.name;
    auto tolerance = [](const at::Tensor& ref, const at::Tensor& exact_value) {
      return 2 * relative_error(ref, exact_value) + 1.0 / 256;
    };
    EXPECT_LE(relative_error(got.loss, exact.loss), tolerance(ref16.loss, exact.loss)) << c.name;
    EXPECT_LE(relative_error(got.grad_hidden, exact.grad_hidden),
              tolerance(ref16.grad_hidden, exact.grad_hidden))
        << c.name;
    EXPECT_LE(relative_error(got.grad_weight, exact.grad_weight),
              tolerance(ref16.grad_weight, exact.grad_weight))
        << c.name;
  }
}

// The rows are split over the threads, but each row is computed by one thread in a fixed order
// and the losses are added in row order.
TEST(CpuCrossEntropy, SameBitsAtOneAndTwoThreads) {
  const Case c{"threads", 40, 32, 5003, 16, 3, 9};
  const Inputs in = make_inputs(c);
  const int threads = at::get_num_threads();
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    at::set_num_threads(1);
    const Result one = fused(in.hidden, in.weight, in.labels, dtype, c.chunk_rows);
    at::set_num_threads(2);
    const Result two = fused(in.hidden, in.weight, in.labels, dtype, c.chunk_rows);
    EXPECT_TRUE(at::equal(one.loss, two.loss)) << dtype;
    EXPECT_TRUE(at::equal(one.grad_hidden, two.grad_hidden)) << dtype;
    EXPECT_TRUE(at::equal(one.grad_weight, two.grad_weight)) << dtype;
  }
  at::set_num_threads(threads);
}

TEST(CpuCrossEntropy, RejectsALabelOutsideTheVocabulary) {
  const at::Tensor hidden = at::randn({3, 8}), weight = at::randn({10, 8});
  const at::Tensor labels = at::tensor({1, 10, 2}, at::TensorOptions(at::kLong));
  EXPECT_THROW(cpu::cross_entropy(hidden, weight, labels, kIgnore), c10::Error);
}

}  // namespace
}  // namespace titan::kernels
