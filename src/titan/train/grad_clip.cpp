#include "titan/train/grad_clip.h"

#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include "titan/kernels/cpu/vector_math.h"

namespace titan::train {
namespace {

using Groups = std::map<std::pair<std::string, int>, std::vector<at::Tensor>>;

// Tensors grouped by (device, dtype), first-seen order inside each group.
Groups by_device_and_dtype(const std::vector<at::Tensor>& tensors) {
  Groups groups;
  for (const at::Tensor& t : tensors)
    groups[{t.device().str(), static_cast<int>(t.scalar_type())}].push_back(t);
  return groups;
}

bool has_cpu_kernel(const at::Tensor& t) {
  return t.is_cpu() && (t.scalar_type() == at::kFloat || t.scalar_type() == at::kBFloat16);
}

// The exact sum of squares of float32 / bfloat16 CPU tensors: every block of kSquaresBlock
// entries of every tensor is one task of a single parallel loop; the blocks' float64 partial
// sums are then added per tensor in block order, and the tensors' sums in list order.
double cpu_sum_of_squares(const std::vector<at::Tensor>& tensors) {
  RECORD_FUNCTION("titan::sum_of_squares", std::vector<c10::IValue>());
  std::vector<at::Tensor> flat;
  std::vector<int64_t> first_block{0};  // tensor i has blocks [first_block[i], first_block[i+1])
  for (const at::Tensor& t : tensors) {
    flat.push_back(t.contiguous());
    first_block.push_back(first_block.back() + (t.numel() + kSquaresBlock - 1) / kSquaresBlock);
  }
  std::vector<double> partial(static_cast<size_t>(first_block.back()));
  at::parallel_for(0, first_block.back(), 16, [&](int64_t begin, int64_t end) {
    size_t t = static_cast<size_t>(std::upper_bound(first_block.begin(), first_block.end(), begin) -
                                   first_block.begin() - 1);
    for (int64_t b = begin; b < end; ++b) {
      while (b >= first_block[t + 1]) ++t;
      const at::Tensor& x = flat[t];
      const int64_t offset = (b - first_block[t]) * kSquaresBlock;
      const int64_t n = std::min(kSquaresBlock, x.numel() - offset);
      partial[b] = x.scalar_type() == at::kFloat
                       ? kernels::cpu::vec::sum_squares_f64(x.const_data_ptr<float>() + offset, n)
                       : kernels::cpu::vec::sum_squares_f64(
                             static_cast<const uint16_t*>(x.const_data_ptr()) + offset, n);
    }
  });
  double total = 0.0;
  for (size_t t = 0; t < flat.size(); ++t) {
    double sum = 0.0;
    for (int64_t b = first_block[t]; b < first_block[t + 1]; ++b) sum += partial[b];
    total += sum;
  }
  return total;
}

// The sum of squares of `tensors`, as total_grad_squares says.
at::Tensor sum_of_squares(const std::vector<at::Tensor>& tensors) {
  at::NoGradGuard no_grad;
  if (tensors.empty()) return at::zeros({}, at::kDouble);
  const at::Device device = tensors.front().device();
  std::vector<at::Tensor> on_cpu, others;
  for (const at::Tensor& t : tensors) (has_cpu_kernel(t) ? on_cpu : others).push_back(t);
  std::vector<at::Tensor> parts;
  if (!on_cpu.empty())
    parts.push_back(at::scalar_tensor(cpu_sum_of_squares(on_cpu), at::kDouble).to(device));
  for (const auto& [key, group] : by_device_and_dtype(others))
    for (const at::Tensor& n : at::_foreach_norm(group, 2, at::kDouble))
      parts.push_back((n * n).to(device));
  return parts.size() == 1 ? parts.front().reshape({}) : at::stack(parts).sum();
}

std::vector<at::Tensor> defined_grads(const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> grads;
  for (const at::Tensor& p : params)
    if (p.grad().defined()) grads.push_back(p.grad());
  return grads;
}

// min(1, max_norm / (total_norm + 1e-6)) with torch's tensor ops (Python's `max_norm / t` is
// t.reciprocal() * max_norm), so the coefficient is bitwise the same float32 value.
at::Tensor clip_coefficient(double max_norm, const at::Tensor& total_norm) {
  return at::clamp((total_norm + 1e-6).reciprocal() * max_norm, std::nullopt, 1.0);
}

}  // namespace

at::Tensor total_grad_squares(const std::vector<at::Tensor>& params) {
  return sum_of_squares(defined_grads(params));
}

GradNorm grad_norm_of_squares(const at::Tensor& squares, double max_norm) {
  at::NoGradGuard no_grad;
  GradNorm out;
  out.norm = squares.sqrt().reshape({}).to(at::kFloat);
  out.coefficient = max_norm > 0 ? clip_coefficient(max_norm, out.norm) : at::ones_like(out.norm);
  return out;
}

void scale_grads(const std::vector<at::Tensor>& params, const at::Tensor& coefficient) {
  at::NoGradGuard no_grad;
  for (auto& [key, grads] : by_device_and_dtype(defined_grads(params)))
    at::_foreach_mul_(grads, coefficient.to(grads.front().device()));
}

}  // namespace titan::train
