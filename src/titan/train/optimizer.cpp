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
#include "titan/kernels/adamw8bit.h"
#include "titan/train/block_layout.h"
#include "titan/train/optimizer_state_names.h"

namespace titan::train {

AdamW::AdamW(const NamedTensors& params, const config::OptimizerConfig& config,
             const distributed::ParameterPlacements* placements)
    : params_(params),
      placements_(placements),
      name_(config.name),
      implementation_(config.implementation) {
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
  if (name_ != "AdamW8bit") return;
  // 8-bit states by the whole parameter's size, so that every layout makes the same choice.
  for (size_t i = 0; i < params_.size(); ++i) {
    const TensorPlacement* placement = placement_of(params_[i].first);
    int64_t numel = params_[i].second.numel();
    if (placement != nullptr) {
      numel = 1;
      for (int64_t d : placement->global_shape) numel *= d;
    }
    if (numel < config.min_8bit_size) continue;
    if (placement != nullptr && !placement->whole() && !absmax_placement(*placement)) {
      float32_by_layout_.push_back(params_[i].first);
      continue;
    }
    slots_[i].eight_bit = true;
    // The 8-bit states exist from the start (zero, as the first step finds them): allocated
    // now, with the model, they do not land among the blocks a step frees and reuses
    // (common/heap_reuse.h), which would raise the peak. A parameter's state still counts
    // from its first gradient (has_state()).
    const at::Tensor& p = params_[i].second;
    const int64_t blocks = kernels::quant_blocks(p.numel());
    for (kernels::BlockwiseQuantized* state : {&slots_[i].exp_avg_8bit, &slots_[i].exp_avg_sq_8bit})
      *state = {at::zeros(p.sizes(), p.options().dtype(at::kByte)),
                at::zeros({blocks}, p.options().dtype(at::kFloat))};
  }
}

const TensorPlacement* AdamW::placement_of(const std::string& name) const {
  return placements_ == nullptr ? nullptr : placements_->find(name);
}

std::vector<int64_t> AdamW::absmax_view(size_t index) const {
  const at::Tensor& p = params_[index].second;
  const TensorPlacement* placement = placement_of(params_[index].first);
  const bool by_rows =
      absmax_by_rows(placement != nullptr ? placement->global_shape : p.sizes().vec());
  return absmax_shape(p.sizes().vec(), by_rows);
}

double AdamW::state_bytes() const {
  double bytes = 0;
  for (size_t i = 0; i < params_.size(); ++i) {
    const at::Tensor& p = params_[i].second;
    const double numel = static_cast<double>(p.numel());
    if (slots_[i].eight_bit)
      bytes += 2 * numel + 2 * 4 * static_cast<double>(kernels::quant_blocks(p.numel()));
    else
      bytes += 2 * numel * (name_ == "AdamW8bit" ? 4.0 : static_cast<double>(p.element_size()));
  }
  return bytes;
}

std::optional<std::string> AdamW::conversion_warning() const {
  if (conversions_.quantized > 0)
    return "the checkpoint holds float32 AdamW moments for " +
           std::to_string(conversions_.quantized) +
           " parameters that optimizer.name AdamW8bit keeps in 8-bit blocks: they were quantised "
           "(the run does not continue the saved one exactly)";
  if (conversions_.dequantized > 0)
    return "the checkpoint holds AdamW8bit's 8-bit moments for " +
           std::to_string(conversions_.dequantized) + " parameters that optimizer.name " + name_ +
           " keeps in float32: they were dequantised (the run does not continue the saved one "
           "exactly)";
  return std::nullopt;
}

void AdamW::init_slot(size_t index) {
  Slot& s = slots_[index];
  if (s.has_state()) return;
  const at::Tensor& p = params_[index].second;
  if (name_ == "AdamW8bit") {
    // As bitsandbytes: codes and absmax zero (the states dequantise to zeros), or float32
    // moments; the step on the CPU.
    s.step = at::zeros({}, at::TensorOptions().dtype(at::kFloat));
    if (!s.eight_bit) {
      s.exp_avg = at::zeros(p.sizes(), p.options().dtype(at::kFloat));
      s.exp_avg_sq = at::zeros(p.sizes(), p.options().dtype(at::kFloat));
      return;
    }
    return;  // the 8-bit states were made with the optimizer
  }
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
  if (name_ == "AdamW8bit") {
    step_8bit(lr);
    for (const auto& hook : step_post_hooks_) hook();
    return;
  }
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

void AdamW::step_8bit(double lr) {
  // Parameter by parameter, as bitsandbytes steps them.
  for (size_t i = 0; i < params_.size(); ++i) {
    at::Tensor p = params_[i].second;
    const at::Tensor& g = p.grad();
    if (!g.defined()) continue;
    TITAN_CHECK(g.sizes() == p.sizes(), "optimizer: gradient of '", params_[i].first,
                "' has shape ", shape_to_string(g.sizes()), " but the parameter has ",
                shape_to_string(p.sizes()));
    init_slot(i);
    Slot& s = slots_[i];
    s.step.add_(1);
    kernels::AdamStepScalars scalars;
    scalars.lr = lr;
    scalars.beta1 = beta1_;
    scalars.beta2 = beta2_;
    scalars.eps = eps_;
    scalars.weight_decay = s.weight_decay;
    scalars.step = static_cast<int64_t>(s.step.item<float>());
    if (!s.eight_bit) {
      kernels::adam_fp32_states_step(p, g, s.exp_avg, s.exp_avg_sq, scalars);
      continue;
    }
    // The kernels take a contiguous float32 or bfloat16 parameter with a gradient of its dtype.
    const bool fusable = implementation_ == "fused" && p.is_contiguous() &&
                         (p.scalar_type() == at::kFloat || p.scalar_type() == at::kBFloat16) &&
                         g.scalar_type() == p.scalar_type();
    if (fusable)
      kernels::adamw8bit_step_fused(p, g, s.exp_avg_8bit, s.exp_avg_sq_8bit, scalars);
    else
      kernels::adamw8bit_step_reference(p, g, s.exp_avg_8bit, s.exp_avg_sq_8bit, scalars);
  }
}

void AdamW::zero_grad() {
  for (auto& [name, p] : params_) p.mutable_grad() = at::Tensor();
}

NamedTensors AdamW::state() const {
  namespace names = optimizer_state;
  NamedTensors out;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Slot& s = slots_[i];
    if (!s.has_state()) continue;
    const std::string& name = params_[i].first;
    if (s.eight_bit) {
      const std::vector<int64_t> view = absmax_view(i);
      out.emplace_back(names::key(name, names::kExpAvgCodes), s.exp_avg_8bit.codes);
      out.emplace_back(names::key(name, names::kExpAvgAbsmax), s.exp_avg_8bit.absmax.view(view));
      out.emplace_back(names::key(name, names::kExpAvgSqCodes), s.exp_avg_sq_8bit.codes);
      out.emplace_back(names::key(name, names::kExpAvgSqAbsmax),
                       s.exp_avg_sq_8bit.absmax.view(view));
    } else {
      out.emplace_back(names::key(name, names::kExpAvg), s.exp_avg);
      out.emplace_back(names::key(name, names::kExpAvgSq), s.exp_avg_sq);
    }
    out.emplace_back(names::key(name, names::kStep), s.step);
  }
  return out;
}

void AdamW::load_state(const NamedTensors& state) {
  namespace names = optimizer_state;
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < params_.size(); ++i) index[params_[i].first] = i;
  // "<param>.<field>" -> tensor, checked for unknown names first.
  std::map<size_t, std::map<std::string, at::Tensor>> fields;
  for (const auto& [key, tensor] : state) {
    const std::optional<names::Key> parsed = names::parse(key);
    TITAN_CHECK(parsed, "optimizer state: unknown tensor '", key,
                "'; expected <param>.exp_avg, <param>.exp_avg_sq, <param>.step or AdamW8bit's "
                "<param>.exp_avg_codes, .exp_avg_absmax, .exp_avg_sq_codes, .exp_avg_sq_absmax");
    const auto it = index.find(parsed->param);
    TITAN_CHECK(it != index.end(), "optimizer state: tensor '", key,
                "' names no parameter of this model");
    TITAN_CHECK(tensor.defined(), "optimizer state: tensor '", key, "' is undefined");
    fields[it->second][parsed->field] = tensor;
  }
  at::NoGradGuard no_grad;
  for (auto& [i, f] : fields) {
    const std::string& name = params_[i].first;
    const at::Tensor& p = params_[i].second;
    auto need = [&](const char* field) -> const at::Tensor& {
      TITAN_CHECK(f.count(field), "optimizer state: '", name, ".", field, "' is missing");
      return f[field];
    };
    const bool saved_8bit = f.count(names::kExpAvgCodes) || f.count(names::kExpAvgAbsmax) ||
                            f.count(names::kExpAvgSqCodes) || f.count(names::kExpAvgSqAbsmax);
    TITAN_CHECK(!saved_8bit || !(f.count(names::kExpAvg) || f.count(names::kExpAvgSq)),
                "optimizer state: '", name, "' has both float32 and 8-bit moments");
    // Every saved moment as (codes, absmax) or float32, checked against the parameter.
    std::map<std::string, kernels::BlockwiseQuantized> quantized;
    std::map<std::string, at::Tensor> moments;
    for (const char* moment : {names::kExpAvg, names::kExpAvgSq}) {
      if (!saved_8bit) {
        const at::Tensor& t = need(moment);
        TITAN_CHECK(t.sizes() == p.sizes(), "optimizer state: '", name, ".", moment, "' has shape ",
                    shape_to_string(t.sizes()), " but the parameter has ",
                    shape_to_string(p.sizes()));
        moments[moment] = t;
        continue;
      }
      const bool first = std::string(moment) == names::kExpAvg;
      const char* codes_field = first ? names::kExpAvgCodes : names::kExpAvgSqCodes;
      const char* absmax_field = first ? names::kExpAvgAbsmax : names::kExpAvgSqAbsmax;
      const at::Tensor& codes = need(codes_field);
      const at::Tensor& absmax = need(absmax_field);
      TITAN_CHECK(codes.sizes() == p.sizes() && codes.scalar_type() == at::kByte,
                  "optimizer state: '", name, ".", codes_field, "' must be uint8 of shape ",
                  shape_to_string(p.sizes()), ", got ", codes.scalar_type(), " ",
                  shape_to_string(codes.sizes()));
      TITAN_CHECK(absmax.numel() == kernels::quant_blocks(p.numel()), "optimizer state: '", name,
                  ".", absmax_field, "' has ", absmax.numel(), " values; the parameter's ",
                  p.numel(), " elements make ", kernels::quant_blocks(p.numel()), " blocks of 256");
      quantized[moment] = {codes, absmax.reshape({-1}).to(at::kFloat)};
    }
    const at::Tensor& step = need(names::kStep);
    TITAN_CHECK(step.numel() == 1, "optimizer state: '", name,
                ".step' must be a scalar, got shape ", shape_to_string(step.sizes()));
    init_slot(i);
    Slot& s = slots_[i];
    for (const char* moment : {names::kExpAvg, names::kExpAvgSq}) {
      const bool is_signed = std::string(moment) == names::kExpAvg;
      if (s.eight_bit) {
        kernels::BlockwiseQuantized& into = is_signed ? s.exp_avg_8bit : s.exp_avg_sq_8bit;
        const kernels::BlockwiseQuantized from =
            saved_8bit ? quantized[moment]
                       : kernels::quantize_blockwise(moments[moment], is_signed);
        into.codes.copy_(from.codes);
        into.absmax.copy_(from.absmax);
      } else {
        (is_signed ? s.exp_avg : s.exp_avg_sq)
            .copy_(saved_8bit ? kernels::dequantize_blockwise(quantized[moment].codes,
                                                              quantized[moment].absmax, is_signed)
                              : moments[moment]);
      }
    }
    if (s.eight_bit && !saved_8bit) ++conversions_.quantized;
    if (!s.eight_bit && saved_8bit) ++conversions_.dequantized;
    s.step.copy_(step.reshape({}));
  }
}

}  // namespace titan::train
