// Test-only driver for the training math, so the pytest peers (torch.optim.AdamW, LambdaLR with
// torchtitan's formula, clip_grad_norm_, F.cross_entropy) can check it end to end.
//
//   titan_optim_harness optim --input IN --output OUT --steps K [options]
//     IN holds "param/<name>" and "grad/<k>/<name>" (k = 0..K-1; a missing grad means the
//     parameter has none that step). Runs K steps of clip -> AdamW(lr schedule) and writes
//     "param/<name>", "state/<key>" (AdamW::state()), "lr" [K] and "grad_norm" [K] (float64).
//     --resume-at R rebuilds optimizer and scheduler from saved state after R steps.
//     --name AdamW8bit (and --min-8bit-size N) runs bitsandbytes' AdamW8bit instead.
//   titan_optim_harness blockwise --input IN --output OUT
//     IN holds tensors "x/<name>". Writes "map/signed", "map/unsigned" (the dynamic maps) and
//     for each x and map "codes/<map>/<name>", "absmax/<map>/<name>" (quantize_blockwise) and
//     "back/<map>/<name>" (dequantize_blockwise of those).
//   titan_optim_harness loss --input IN --output OUT [--chunk C --grad-scale S]
//     IN holds "logits", "labels", "hidden", "weight", "hidden_labels". Writes the losses, the
//     token count and the gradients of grad_scale * mean loss.
//   titan_optim_harness grad-norm --input IN --output OUT --layout whole|fsdp|ddp [--max-norm M]
//     IN holds "grad/<name>" (names in the metadata entry "order"). Each rank (under torchrun)
//     holds what that layout gives it: FSDP its rows of dim 0 (a Shard(0) placement, zero
//     padded), DDP and whole everything. The norm is computed as the trainer does: the local
//     sum of squares, summed over the ranks for FSDP. Rank 0 writes "squares" [1] (float64),
//     "norm" and "coefficient" (float32 scalars).
#include <ATen/ATen.h>

#include <cstdlib>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "titan/checkpoint/safetensors.h"
#include "titan/common/error.h"
#include "titan/common/placement.h"
#include "titan/distributed/device_mesh.h"
#include "titan/distributed/parameter_placements.h"
#include "titan/distributed/world.h"
#include "titan/kernels/blockwise_8bit.h"
#include "titan/kernels/dynamic_map.h"
#include "titan/train/grad_clip.h"
#include "titan/train/grad_norm.h"
#include "titan/train/loss.h"
#include "titan/train/lr_scheduler.h"
#include "titan/train/optimizer.h"

namespace {

using titan::NamedTensors;

// torch.nn.utils.clip_grad_norm_ on one process: the norm, then the scale when the coefficient
// is below 1 (as the trainer's step applies them).
double clip_grad_norm(const std::vector<at::Tensor>& params, double max_norm) {
  const titan::train::GradNorm n = titan::train::grad_norm_of_squares(
      titan::train::total_grad_squares(params).reshape({1}), max_norm);
  if (n.coefficient.item<float>() < 1.0f) titan::train::scale_grads(params, n.coefficient);
  return n.norm.item<double>();
}

// "--key value" pairs after the mode.
class Flags {
 public:
  Flags(int argc, char** argv) {
    for (int i = 2; i < argc; i += 2) {
      const std::string key = argv[i];
      TITAN_CHECK(key.rfind("--", 0) == 0 && i + 1 < argc, "expected --key value, got '", key, "'");
      values_[key.substr(2)] = argv[i + 1];
    }
  }
  std::string str(const std::string& key, const std::string& fallback = "") const {
    auto it = values_.find(key);
    if (it != values_.end()) return it->second;
    TITAN_CHECK(!fallback.empty() || key == "param-groups", "missing --", key);
    return fallback;
  }
  double num(const std::string& key, double fallback) const {
    auto it = values_.find(key);
    return it == values_.end() ? fallback : std::stod(it->second);
  }

 private:
  std::map<std::string, std::string> values_;
};

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= text.size() && !text.empty()) {
    const size_t end = text.find(sep, start);
    parts.push_back(text.substr(start, end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return parts;
}

at::Tensor as_tensor(const std::vector<double>& values) {
  return at::tensor(values, at::TensorOptions().dtype(at::kDouble));
}

NamedTensors deep_copy(const NamedTensors& tensors) {
  NamedTensors out;
  for (const auto& [name, t] : tensors) out.emplace_back(name, t.clone());
  return out;
}

int run_optim(const Flags& flags) {
  namespace ckpt = titan::checkpoint;
  const auto input = ckpt::SafetensorsFile::open(flags.str("input"));
  const int64_t steps = static_cast<int64_t>(flags.num("steps", 1));
  const int64_t resume_at = static_cast<int64_t>(flags.num("resume-at", -1));

  titan::config::OptimizerConfig oc;
  oc.lr = flags.num("lr", oc.lr);
  oc.betas = {flags.num("beta1", 0.9), flags.num("beta2", 0.95)};
  oc.eps = flags.num("eps", oc.eps);
  oc.weight_decay = flags.num("weight-decay", oc.weight_decay);
  oc.implementation = flags.str("impl", "fused");
  oc.name = flags.str("name", "AdamW");
  oc.min_8bit_size = static_cast<int64_t>(flags.num("min-8bit-size", 4096));
  oc.param_groups = split(flags.str("param-groups"), ';');
  titan::config::LRSchedulerConfig sc;
  sc.warmup_steps = static_cast<int64_t>(flags.num("warmup", 0));
  sc.total_steps = static_cast<int64_t>(flags.num("total-steps", -1));
  sc.decay_ratio = flags.num("decay-ratio", -1);
  sc.decay_type = flags.str("decay-type", "linear");
  sc.min_lr_factor = flags.num("min-lr-factor", 0);
  const double max_norm = flags.num("max-norm", 1.0);

  // Parameter order matters for the summation order of the global grad norm, so it comes from
  // the metadata entry "param_order" (comma-separated), as the peer lists them.
  const auto order = input.metadata().find("param_order");
  TITAN_CHECK(order != input.metadata().end(), flags.str("input"), ": no param_order metadata");
  NamedTensors params;
  for (const std::string& name : split(order->second, ','))
    params.emplace_back(name, input.tensor("param/" + name).clone().requires_grad_(true));

  auto optimizer = std::make_unique<titan::train::AdamW>(params, oc);
  auto scheduler = std::make_unique<titan::train::LRScheduler>(sc, steps, oc.lr);
  std::vector<double> lrs, norms;
  for (int64_t k = 0; k < steps; ++k) {
    if (k == resume_at) {
      // What a checkpoint round trip does: copies of params and state into fresh objects.
      const NamedTensors saved_state = deep_copy(optimizer->state());
      params = deep_copy(params);
      for (auto& [name, p] : params) p.requires_grad_(true);
      optimizer = std::make_unique<titan::train::AdamW>(params, oc);
      optimizer->load_state(saved_state);
      const int64_t taken = scheduler->steps_taken();
      scheduler = std::make_unique<titan::train::LRScheduler>(sc, steps, oc.lr);
      scheduler->set_steps_taken(taken);
    }
    std::vector<at::Tensor> tensors;
    for (auto& [name, p] : params) {
      const std::string key = "grad/" + std::to_string(k) + "/" + name;
      if (input.contains(key)) p.mutable_grad() = input.tensor(key).clone();
      tensors.push_back(p);
    }
    norms.push_back(clip_grad_norm(tensors, max_norm));
    lrs.push_back(scheduler->current_lr());
    optimizer->step(scheduler->current_lr());
    scheduler->step();
    optimizer->zero_grad();
  }

  NamedTensors out;
  for (const auto& [name, p] : params) out.emplace_back("param/" + name, p.detach());
  for (const auto& [key, t] : optimizer->state()) out.emplace_back("state/" + key, t);
  out.emplace_back("lr", as_tensor(lrs));
  out.emplace_back("grad_norm", as_tensor(norms));
  ckpt::write_safetensors(flags.str("output"), out);
  return 0;
}

int run_blockwise(const Flags& flags) {
  namespace ckpt = titan::checkpoint;
  const auto input = ckpt::SafetensorsFile::open(flags.str("input"));
  NamedTensors out = {{"map/signed", titan::kernels::dynamic_map(true)},
                      {"map/unsigned", titan::kernels::dynamic_map(false)}};
  for (const auto& info : input.tensors()) {
    const std::string& key = info.name;
    if (key.rfind("x/", 0) != 0) continue;
    const std::string name = key.substr(2);
    const at::Tensor x = input.tensor(key);
    for (const bool is_signed : {true, false}) {
      const std::string map = is_signed ? "signed" : "unsigned";
      const titan::kernels::BlockwiseQuantized q = titan::kernels::quantize_blockwise(x, is_signed);
      out.emplace_back("codes/" + map + "/" + name, q.codes);
      out.emplace_back("absmax/" + map + "/" + name, q.absmax);
      out.emplace_back("back/" + map + "/" + name,
                       titan::kernels::dequantize_blockwise(q.codes, q.absmax, is_signed));
    }
  }
  ckpt::write_safetensors(flags.str("output"), out);
  return 0;
}

int run_loss(const Flags& flags) {
  namespace ckpt = titan::checkpoint;
  namespace tt = titan::train;
  const auto input = ckpt::SafetensorsFile::open(flags.str("input"));
  const int64_t chunk = static_cast<int64_t>(flags.num("chunk", 0));
  const double grad_scale = flags.num("grad-scale", 1.0);
  NamedTensors out;

  const at::Tensor logits = input.tensor("logits").clone().requires_grad_(true);
  const at::Tensor labels = input.tensor("labels").clone();
  const at::Tensor ce_mean = tt::cross_entropy_loss(logits, labels);
  (ce_mean * grad_scale).backward();
  out.emplace_back("ce_mean", ce_mean.detach());
  out.emplace_back("ce_sum", tt::cross_entropy_sum(logits, labels).detach());
  out.emplace_back("ce_grad_logits", logits.grad());
  out.emplace_back("count", at::scalar_tensor(tt::count_valid_tokens(labels), at::kLong));

  const at::Tensor hidden = input.tensor("hidden").clone().requires_grad_(true);
  const at::Tensor weight = input.tensor("weight").clone().requires_grad_(true);
  const at::Tensor hidden_labels = input.tensor("hidden_labels").clone();
  const at::Tensor fl_mean =
      tt::linear_cross_entropy_loss_chunked(hidden, weight, hidden_labels, -100, chunk);
  (fl_mean * grad_scale).backward();
  out.emplace_back("flce_mean", fl_mean.detach());
  out.emplace_back("flce_sum", tt::linear_cross_entropy_sum_chunked(
                                   hidden.detach(), weight.detach(), hidden_labels, -100, chunk));
  out.emplace_back("flce_grad_hidden", hidden.grad());
  out.emplace_back("flce_grad_weight", weight.grad());
  ckpt::write_safetensors(flags.str("output"), out);
  return 0;
}

int run_grad_norm(const Flags& flags) {
  namespace ckpt = titan::checkpoint;
  namespace td = titan::distributed;
  const auto input = ckpt::SafetensorsFile::open(flags.str("input"));
  const std::string layout = flags.str("layout");
  TITAN_CHECK(layout == "whole" || layout == "fsdp" || layout == "ddp", "--layout ", layout);
  td::World world(td::launch_env_from_environment(), td::WorldOptions{});
  const auto order = input.metadata().find("order");
  TITAN_CHECK(order != input.metadata().end(), flags.str("input"), ": no order metadata");
  // The mesh of the layout: FSDP shards over every rank, DDP replicates over them.
  td::ParallelDims dims;
  dims.world_size = world.size();
  (layout == "ddp" ? dims.dp_replicate : dims.dp_shard) = world.size();
  const td::DeviceMesh mesh = world.size() > 1 ? td::DeviceMesh(world, dims) : td::DeviceMesh(dims);
  td::ParameterPlacements placements;
  titan::NamedTensors params;
  for (const std::string& name : split(order->second, ',')) {
    at::Tensor grad = input.tensor("grad/" + name).clone();
    if (layout == "fsdp") {
      // This rank's rows of dim 0, zero-padded: FSDP's placement.
      const titan::TensorPlacement placement{
          grad.sizes().vec(),
          {{"dp_shard", world.size(), world.rank(), titan::Placement::shard(0)}}};
      grad = td::local_piece(placement, grad);
      placements.set(name, placement);
    }
    at::Tensor p = at::zeros(grad.sizes(), grad.options()).requires_grad_(true);
    p.mutable_grad() = grad;
    params.emplace_back(name, p);
  }
  // The trainer's reduction: each placement's squares summed over the groups it is sharded on.
  const at::Tensor squares = titan::train::GlobalGradSquares(params, placements, mesh)();
  const titan::train::GradNorm n =
      titan::train::grad_norm_of_squares(squares, flags.num("max-norm", 1.0));
  if (world.rank() == 0)
    ckpt::write_safetensors(
        flags.str("output"),
        {{"squares", squares}, {"norm", n.norm}, {"coefficient", n.coefficient}});
  world.world_group()->barrier();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string mode = argc > 1 ? argv[1] : "";
    const Flags flags(argc, argv);
    if (mode == "optim") return run_optim(flags);
    if (mode == "loss") return run_loss(flags);
    if (mode == "grad-norm") return run_grad_norm(flags);
    if (mode == "blockwise") return run_blockwise(flags);
    std::cerr << "usage: titan_optim_harness optim|loss|grad-norm|blockwise --input IN --output "
                 "OUT [...]\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
