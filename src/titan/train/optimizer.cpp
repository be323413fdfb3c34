#include "titan/train/optimizer.h"

#include <ATen/core/grad_mode.h>
#include <cmath>

#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "titan/common/error.h"
#include "titan/common/strings.h"
#include "titan/config/validate.h"
#include "titan/train/optimizer_state_names.h"

namespace titan::train {

AdamW::AdamW(const NamedTensors& params, const config::OptimizerConfig& config)
    : params_(params), implementation_(config.implementation) {
  config::validate_optimizer_config(config);
  beta1_ = config.betas[0];
  beta2_ = config.betas[1];
  eps_ = config.eps;
  std::set<std::string> seen;
  for (const auto& [name, p] : params_) {
    TITAN_CHECK(p.defined(), "optimizer: parameter '", name, "' is undefined");
    TITAN_CHECK(seen.insert(name).second, "optimizer: parameter '", name, "' appears twice");
    TITAN_CHECK(at::isFloatingType(p.scalar_type()), "optimizer: parameter '", name,
                "' has non-floating dtype ", p.scalar_type());
  }
  groups_ = build_param_groups(params_, config);
  slots_.resize(params_.size());
  for (const ParamGroup& g : groups_)
    for (size_t i : g.members) slots_[i].weight_decay = g.weight_decay;
}

void AdamW::init_slot(size_t index) {
  Slot& s = slots_[index];
  if (s.exp_avg.defined()) return;
  const at::Tensor& p = params_[index].second;
  // torch keeps `step` on the CPU unless fused or capturable; the fused kernel reads it on the
  // parameter's device.
  const at::Device step_device = implementation_ == "fused" ? p.device() : at::Device(at::kCPU);
  s.step = at::zeros({}, at::TensorOptions().dtype(at::kFloat).device(step_device));
  s.exp_avg = at::zeros_like(p, at::MemoryFormat::Preserve);
  s.exp_avg_sq = at::zeros_like(p, at::MemoryFormat::Preserve);
}

std::vector<AdamW::Bucket> AdamW::buckets_with_grads() {
  // Keyed like torch's _group_tensors_by_device_and_dtype, plus the group's weight decay.
  std::map<std::tuple<double, std::string, int>, Bucket> buckets;
  for (size_t i = 0; i < params_.size(); ++i) {
    const at::Tensor& p = params_[i].second;
    const at::Tensor& g = p.grad();
    if (!g.defined()) continue;
    TITAN_CHECK(g.sizes() == p.sizes(), "optimizer: gradient of '", params_[i].first,
                "' has shape ", shape_to_string(g.sizes()), " but the parameter has ",
                shape_to_string(p.sizes()));
    init_slot(i);
    Slot& s = slots_[i];
    Bucket& b = buckets[{s.weight_decay, p.device().str(), static_cast<int>(p.scalar_type())}];
    b.weight_decay = s.weight_decay;
    b.params.push_back(p);
    b.grads.push_back(g);
    b.exp_avgs.push_back(s.exp_avg);
    b.exp_avg_sqs.push_back(s.exp_avg_sq);
    b.steps.push_back(s.step);
  }
  std::vector<Bucket> out;
  for (auto& [key, b] : buckets) out.push_back(std::move(b));
  return out;
}

void AdamW::step(double lr) {
  at::NoGradGuard no_grad;
  std::vector<Bucket> buckets = buckets_with_grads();
  for (Bucket& b : buckets) {
    if (implementation_ == "fused")
      step_fused(b, lr);
    else if (implementation_ == "foreach")
      step_foreach(b, lr);
    else
      step_for_loop(b, lr);
  }
  for (const auto& hook : step_post_hooks_) hook();
}

void AdamW::step_fused(Bucket& b, double lr) const {
  // As torch's _fused_adam: the caller advances the step counters, the kernel does the rest.
  at::_foreach_add_(b.steps, 1);
  at::_fused_adamw_(b.params, b.grads, b.exp_avgs, b.exp_avg_sqs, /*max_exp_avg_sqs=*/{}, b.steps,
                    lr, beta1_, beta2_, b.weight_decay, eps_, /*amsgrad=*/false,
                    /*maximize=*/false);
}

void AdamW::step_foreach(Bucket& b, double lr) const {
  // The op sequence of torch's _multi_tensor_adam (non-capturable), so results are bitwise equal.
  at::_foreach_add_(b.steps, at::scalar_tensor(1.0, at::kFloat), 1.0);
  if (b.weight_decay != 0) at::_foreach_mul_(b.params, 1 - lr * b.weight_decay);
  at::_foreach_lerp_(b.exp_avgs, b.grads, 1 - beta1_);
  at::_foreach_mul_(b.exp_avg_sqs, beta2_);
  at::_foreach_addcmul_(b.exp_avg_sqs, b.grads, b.grads, 1 - beta2_);
  std::vector<at::Scalar> step_size, bias_correction2_sqrt;
  for (const at::Tensor& s : b.steps) {
    const double step = s.item<float>();
    const double bias_correction1 = 1 - std::pow(beta1_, step);
    const double bias_correction2 = 1 - std::pow(beta2_, step);
    step_size.emplace_back((lr / bias_correction1) * -1);
    bias_correction2_sqrt.emplace_back(std::pow(bias_correction2, 0.5));
  }
  std::vector<at::Tensor> denom = at::_foreach_sqrt(b.exp_avg_sqs);
  at::_foreach_div_(denom, bias_correction2_sqrt);
  at::_foreach_add_(denom, eps_);
  at::_foreach_addcdiv_(b.params, b.exp_avgs, denom, step_size);
}

void AdamW::step_for_loop(Bucket& b, double lr) const {
  // The per-tensor ops of torch's _single_tensor_adam (non-capturable).
  for (size_t i = 0; i < b.params.size(); ++i) {
    at::Tensor& param = b.params[i];
    b.steps[i].add_(1);
    if (b.weight_decay != 0) param.mul_(1 - lr * b.weight_decay);
    b.exp_avgs[i].lerp_(b.grads[i], 1 - beta1_);
    b.exp_avg_sqs[i].mul_(beta2_).addcmul_(b.grads[i], b.grads[i], 1 - beta2_);
    const double step = b.steps[i].item<float>();
    const double bias_correction1 = 1 - std::pow(beta1_, step);
    const double bias_correction2 = 1 - std::pow(beta2_, step);
    const double step_size = lr / bias_correction1;
    const double bias_correction2_sqrt = std::pow(bias_correction2, 0.5);
    at::Tensor denom = (b.exp_avg_sqs[i].sqrt() / bias_correction2_sqrt).add_(eps_);
    param.addcdiv_(b.exp_avgs[i], denom, -step_size);
  }
}

void AdamW::zero_grad() {
  for (auto& [name, p] : params_) p.mutable_grad() = at::Tensor();
}

NamedTensors AdamW::state() const {
  NamedTensors out;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Slot& s = slots_[i];
    if (!s.exp_avg.defined()) continue;
    const std::string& name = params_[i].first;
    out.emplace_back(optimizer_state::key(name, optimizer_state::kExpAvg), s.exp_avg);
    out.emplace_back(optimizer_state::key(name, optimizer_state::kExpAvgSq), s.exp_avg_sq);
    out.emplace_back(optimizer_state::key(name, optimizer_state::kStep), s.step);
  }
  return out;
}

void AdamW::load_state(const NamedTensors& state) {
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < params_.size(); ++i) index[params_[i].first] = i;
  // "<param>.<field>" -> tensor, checked for unknown names first.
  std::map<size_t, std::map<std::string, at::Tensor>> fields;
  for (const auto& [key, tensor] : state) {
    const std::optional<optimizer_state::Key> parsed = optimizer_state::parse(key);
    TITAN_CHECK(parsed, "optimizer state: unknown tensor '", key,
                "'; expected <param>.exp_avg, <param>.exp_avg_sq or <param>.step");
    const std::string& field = parsed->field;
    const auto it = index.find(parsed->param);
    TITAN_CHECK(it != index.end(), "optimizer state: tensor '", key,
                "' names no parameter of this model");
    TITAN_CHECK(tensor.defined(), "optimizer state: tensor '", key, "' is undefined");
    fields[it->second][field] = tensor;
  }
  at::NoGradGuard no_grad;
  for (auto& [i, f] : fields) {
    const std::string& name = params_[i].first;
    const at::Tensor& p = params_[i].second;
    for (const std::string& needed : optimizer_state::fields())
      TITAN_CHECK(f.count(needed), "optimizer state: '", name, ".", needed, "' is missing");
    for (const std::string& field : optimizer_state::fields()) {
      if (!optimizer_state::is_moment(field)) continue;
      TITAN_CHECK(f[field].sizes() == p.sizes(), "optimizer state: '", name, ".", field,
                  "' has shape ", shape_to_string(f[field].sizes()), " but the parameter has ",
                  shape_to_string(p.sizes()));
    }
    const at::Tensor& step = f[optimizer_state::kStep];
    TITAN_CHECK(step.numel() == 1, "optimizer state: '", name,
                ".step' must be a scalar, got shape ", shape_to_string(step.sizes()));
    init_slot(i);
    Slot& s = slots_[i];
    s.exp_avg.copy_(f[optimizer_state::kExpAvg]);
    s.exp_avg_sq.copy_(f[optimizer_state::kExpAvgSq]);
    s.step.copy_(step.reshape({}));
  }
}

}  // namespace titan::train
