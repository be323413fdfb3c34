// The head and the loss on the CPU (op cross_entropy, implementation "fused").
//
// Chunk by chunk of rows: the logits GEMM into a buffer kept from one call to the next, then
// per row a pass for its maximum, one that overwrites the logits with exp(logit - max) and sums
// them (the row's loss), and one that scales them into their gradient, softmax -
// one_hot(label), in the activations' dtype (as the CUDA kernel does); then the two gradient
// GEMMs read that buffer. The GEMMs are oneDNN's (gemm.h), or in bfloat16 on a CPU with AMX the
// AMX kernels of amx_linear.h (the float32 weight read as it is, its gradient summed in float32
// over every chunk). Gradients are computed in forward (the logits never outlive their chunk)
// and backward scales them in place by the incoming gradient.
// reference, by contrast, runs logsumexp (several passes), a float32 copy, exp, scatter and mask
// over [rows, vocab] temporaries.
//
// Every row is computed by one thread in a fixed order and the rows' losses are added in row
// order, so the result does not depend on the thread count.
#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <cmath>

#include "titan/kernels/cpu/amx_linear.h"
#include "titan/kernels/cpu/cpu_kernels.h"
#include "titan/kernels/cpu/gemm.h"
#include "titan/kernels/cpu/rows.h"

namespace titan::kernels::cpu {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// At most 2^27 logits (512 MB in float32) per chunk, and chunks of equal size. Fewer, larger
// chunks make faster GEMMs: the weight gradient is read and written once per chunk, and a
// short last chunk is a slow GEMM. The debug model's 4 x 128 tokens (vocabulary 151936) are one
// chunk, whose head GEMMs take ~15% less time than two chunks of 256 rows.
int64_t chunk_rows_for(int64_t rows, int64_t vocab) {
  constexpr int64_t kLogitsPerChunk = int64_t{1} << 27;
  const int64_t most = std::clamp<int64_t>(kLogitsPerChunk / std::max<int64_t>(vocab, 1), 1,
                                           std::max<int64_t>(rows, 1));
  const int64_t chunks = (rows + most - 1) / most;
  return std::max<int64_t>((rows + chunks - 1) / std::max<int64_t>(chunks, 1), 1);
}

// The chunk's logits buffer, kept by the thread that calls the op (the training thread) from
// one call to the next. A buffer this size is mapped fresh by malloc at every call otherwise,
// and the kernel then zero-fills its pages on first touch: tens of ms a step. It grows to the
// largest chunk seen (at most 2^27 elements) and is never shared: the op returns before
// another call can reuse it.
at::Tensor chunk_buffer(int64_t rows, int64_t vocab, at::ScalarType dtype) {
  thread_local at::Tensor bytes;
  const int64_t needed = rows * vocab * static_cast<int64_t>(c10::elementSize(dtype));
  if (!bytes.defined() || bytes.numel() < needed) {
    bytes = at::Tensor();  // the old buffer goes before the new one is allocated
    bytes = at::empty({needed}, at::TensorOptions(at::kByte));
  }
  return bytes.narrow(0, 0, needed).view(dtype).view({rows, vocab});
}

// Losses (and, with write_grad, gradients in place) of the rows of one chunk of logits.
void loss_and_grad_rows(const at::Tensor& logits, const int64_t* labels, int64_t ignore_index,
                        bool write_grad, float* loss) {
  RECORD_FUNCTION("titan::cross_entropy_rows", std::vector<c10::IValue>({logits}));
  const Rows rows(logits);
  const int64_t vocab = rows.width();
  at::parallel_for(0, logits.size(0), 1, [&](int64_t begin, int64_t end) {
    std::vector<float> scratch;
    for (int64_t r = begin; r < end; ++r) {
      const int64_t label = labels[r];
      const bool valid = label != ignore_index;
      TORCH_CHECK(!valid || (label >= 0 && label < vocab), "cross_entropy: label ", label,
                  " is outside [0, ", vocab, ")");
      if (!valid) {
        loss[r] = 0.0f;
        if (write_grad) {
          float* out = rows.target(r, scratch);
          std::fill(out, out + vocab, 0.0f);
          rows.write(r, out);
        }
        continue;
      }
      // Three passes over the row: its maximum (from memory), then exp(x - max) written to the
      // gradient's row and summed, then the scale by 1 / sum; the last two find the row in
      // this core's cache. One exp per element.
      const float* x = rows.read(r, scratch);
      const float x_label = x[label];
      const float top = vec::max_of(x, vocab);
      // For bfloat16, x is `scratch` and becomes the gradient in place; for float32 x is the row.
      float* out = write_grad ? rows.target(r, scratch) : nullptr;
      const double sum = vec::exp_shifted_sum(x, top, out, vocab);
      const double lse = static_cast<double>(top) + std::log(sum);
      loss[r] = static_cast<float>(lse - static_cast<double>(x_label));
      if (!write_grad) continue;
      vec::scale(static_cast<float>(1.0 / sum), out, out, vocab);
      out[label] -= 1.0f;
      rows.write(r, out);
    }
  });
}

class CrossEntropyFunction : public torch::autograd::Function<CrossEntropyFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& hidden_in,
                            const at::Tensor& weight, const at::Tensor& labels_in,
                            int64_t ignore_index, int64_t chunk_rows) {
    const at::Tensor hidden = hidden_in.contiguous();
    const at::Tensor labels = labels_in.contiguous();
    const bool grad_hidden = hidden_in.requires_grad(), grad_weight = weight.requires_grad();
    const bool write_grad = grad_hidden || grad_weight;
    const int64_t n = hidden.size(0), vocab = weight.size(0);
    const at::ScalarType dtype = hidden.scalar_type();
    // bfloat16 on an AMX CPU: the head's three products on the AMX kernels, which read the
    // (float32 master or bfloat16) weight as it is and sum its gradient in float32 over all
    // chunks; otherwise the weight cast to the activations' dtype and gemm.h's GEMMs.
    const bool amx = dtype == at::kBFloat16 && amx_matmul_supports(weight);
    const at::Tensor w = amx ? weight : weight.to(dtype);
    std::vector<float> row_loss(n);
    at::Tensor dh = grad_hidden ? at::empty_like(hidden) : at::Tensor();
    // The weight gradient accumulates in float32 (written by the first chunk's GEMM).
    at::Tensor dw =
        grad_weight ? at::empty(weight.sizes(), weight.options().dtype(at::kFloat)) : at::Tensor();
    if (grad_weight && n == 0) dw.zero_();
    const int64_t chunk = chunk_rows > 0 ? chunk_rows : chunk_rows_for(n, vocab);
    for (int64_t start = 0; start < n; start += chunk) {
      const int64_t rows = std::min(chunk, n - start);
      const at::Tensor h = hidden.narrow(0, start, rows);
      at::Tensor logits = chunk_buffer(rows, vocab, dtype);
      if (amx)
        amx_mixed_forward_out(h, w, logits);
      else
        gemm_out(h, w.t(), logits);
      loss_and_grad_rows(logits, labels.const_data_ptr<int64_t>() + start, ignore_index, write_grad,
                         row_loss.data() + start);
      if (grad_hidden) {
        if (amx)
          dh.narrow(0, start, rows).copy_(amx_mixed_backward(logits, w));
        else
          gemm_out(logits, w, dh.narrow(0, start, rows));
      }
      if (!grad_weight) continue;
      if (amx) {
        amx_weight_grad(logits, h, dw, /*accumulate=*/start > 0);
      } else if (dtype == at::kFloat) {
        gemm_out(logits.t(), h, dw, /*accumulate=*/start > 0);
      } else if (start == 0) {
        dw.copy_(gemm(logits.t(), h));
      } else {
        dw.add_(gemm(logits.t(), h));  // as reference: the GEMM in bfloat16, the sum in float32
      }
    }
    double total = 0.0;
    for (float l : row_loss) total += l;
    ctx->save_for_backward({dh, grad_weight ? dw.to(weight.scalar_type()) : at::Tensor()});
    return at::scalar_tensor(static_cast<float>(total), hidden.options().dtype(at::kFloat));
  }

  // The saved gradients are scaled in place (they are this node's alone, and then belong to
  // the parameters: no [vocab, hidden] copy). A second backward through the same graph finds
  // them modified and autograd says so.
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    auto saved = ctx->get_saved_variables();
    const at::Tensor& g = grad_outputs[0];
    for (at::Tensor& grad : saved)
      if (grad.defined()) grad.mul_(g.to(grad.scalar_type()));
    return {saved[0], saved[1], at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor cross_entropy_chunked(const at::Tensor& hidden, const at::Tensor& weight,
                                 const at::Tensor& labels, int64_t ignore_index,
                                 int64_t chunk_rows) {
  TORCH_CHECK(hidden.dim() == 2 && weight.dim() == 2 && weight.size(1) == hidden.size(1) &&
                  labels.numel() == hidden.size(0),
              "cross_entropy (cpu): hidden [N, H], weight [V, H] and labels [N] expected, got ",
              hidden.sizes(), ", ", weight.sizes(), ", ", labels.sizes());
  TORCH_CHECK(
      supports(hidden.device().type(), hidden.scalar_type()) && weight.is_cpu() && labels.is_cpu(),
      "cross_entropy=fused on the CPU takes float32 or bfloat16 activations on the CPU, "
      "got ",
      hidden.scalar_type(), " on ", hidden.device());
  return CrossEntropyFunction::apply(hidden, weight, labels.reshape({-1}).to(at::kLong),
                                     ignore_index, chunk_rows);
}

at::Tensor cross_entropy(const at::Tensor& hidden, const at::Tensor& weight,
                         const at::Tensor& labels, int64_t ignore_index) {
  return cross_entropy_chunked(hidden, weight, labels, ignore_index, /*chunk_rows=*/0);
}

}  // namespace titan::kernels::cpu
