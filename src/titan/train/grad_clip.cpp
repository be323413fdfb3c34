#include "titan/train/grad_clip.h"

#include <ATen/core/grad_mode.h>

#include <map>
#include <string>
#include <utility>

namespace titan::train {
namespace {

// Defined gradients grouped by (device, dtype), first-seen order inside each group.
std::map<std::pair<std::string, int>, std::vector<at::Tensor>> grads_by_device_and_dtype(
    const std::vector<at::Tensor>& params) {
  std::map<std::pair<std::string, int>, std::vector<at::Tensor>> groups;
  for (const at::Tensor& p : params) {
    const at::Tensor& g = p.grad();
    if (g.defined()) groups[{g.device().str(), static_cast<int>(g.scalar_type())}].push_back(g);
  }
  return groups;
}

at::Device first_grad_device(const std::vector<at::Tensor>& params) {
  for (const at::Tensor& p : params)
    if (p.grad().defined()) return p.grad().device();
  return at::kCPU;
}

}  // namespace

at::Tensor total_grad_squares(const std::vector<at::Tensor>& params) {
  at::NoGradGuard no_grad;
  const auto groups = grads_by_device_and_dtype(params);
  if (groups.empty()) return at::zeros({}, at::kDouble);
  const at::Device device = first_grad_device(params);
  std::vector<at::Tensor> norms;
  for (const auto& [key, grads] : groups)
    for (at::Tensor& n : at::_foreach_norm(grads, 2, at::kDouble)) norms.push_back(n.to(device));
  const at::Tensor norms64 = at::stack(norms);
  return (norms64 * norms64).sum();
}

at::Tensor total_grad_norm(const std::vector<at::Tensor>& params) {
  return total_grad_squares(params).sqrt().to(at::kFloat);
}

namespace {

// min(1, max_norm / (total_norm + 1e-6)) with torch's tensor ops (Python's `max_norm / t` is
// t.reciprocal() * max_norm), so the coefficient is bitwise the same float32 value.
at::Tensor clip_coefficient(double max_norm, const at::Tensor& total_norm) {
  return at::clamp((total_norm + 1e-6).reciprocal() * max_norm, std::nullopt, 1.0);
}

void scale_grads(const std::vector<at::Tensor>& params, const at::Tensor& coef) {
  for (auto& [key, grads] : grads_by_device_and_dtype(params))
    at::_foreach_mul_(grads, coef.to(grads.front().device()));
}

}  // namespace

void clip_grads_with_norm(const std::vector<at::Tensor>& params, double max_norm,
                          const at::Tensor& total_norm) {
  at::NoGradGuard no_grad;
  scale_grads(params, clip_coefficient(max_norm, total_norm));
}

double clip_grad_norm(const std::vector<at::Tensor>& params, double max_norm,
                      const std::function<void(at::Tensor&)>& reduce_squares) {
  at::NoGradGuard no_grad;
  at::Tensor squares = total_grad_squares(params).reshape({1});
  if (reduce_squares) reduce_squares(squares);
  return clip_grad_norm_with_squares(params, max_norm, squares);
}

double clip_grad_norm_with_squares(const std::vector<at::Tensor>& params, double max_norm,
                                   const at::Tensor& global_squares) {
  at::NoGradGuard no_grad;
  const at::Tensor norm = global_squares.sqrt().reshape({}).to(at::kFloat);
  if (max_norm <= 0) return norm.item<double>();
  const at::Tensor coef = clip_coefficient(max_norm, norm);
  // One host read for both; the caller logs the norm anyway. Scaling by a coefficient of
  // exactly 1 changes nothing, so that pass is skipped.
  const at::Tensor both = at::stack({norm, coef}).to(at::kCPU, at::kDouble);
  if (both[1].item<double>() < 1.0) scale_grads(params, coef);
  return both[0].item<double>();
}

}  // namespace titan::train
