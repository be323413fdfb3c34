#include "titan/train/memory_fit.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "titan/common/error.h"
#include "titan/lora/lora_model.h"
#include "titan/lora/lora_targets.h"
#include "titan/models/common/lora.h"
#include "titan/train/report/device_stats.h"

namespace titan::train {
namespace {

double bytes_of(at::ScalarType dtype) { return static_cast<double>(c10::elementSize(dtype)); }

// How many ranks split a weight of this shape: FSDP splits everything over dp_shard x cp,
// tensor parallelism the matrices over tp (expert stacks: expert parallelism borrows from the
// same ranks).
double split_of(const at::Tensor& t, const distributed::ParallelDims& dims) {
  const int64_t fsdp = dims.dp_shard * dims.cp;
  return static_cast<double>(t.dim() >= 2 ? fsdp * dims.tp : fsdp);
}

// Bytes of a [rows, cols] weight in NF4: half a byte a weight, plus its scales (a float32 per
// block of 64, or about a byte per block once double-quantised).
double nf4_bytes(double numel, bool double_quantization) {
  const double blocks = std::ceil(numel / 64.0);
  return std::ceil(numel / 2.0) +
         (double_quantization ? blocks + std::ceil(blocks / 256.0) * 4.0 : blocks * 4.0);
}

// One micro-batch's saved activations, roughly: per layer and token, the tensors a pre-norm
// decoder layer keeps for its backward (norm inputs and outputs, q/k/v, attention output, the
// MLP's three intermediate-sized tensors); under full checkpointing only each layer's input
// and one layer's worth, under selective about half. An estimate for a warning, not a bound.
double activation_bytes(const MemoryFitRun& run) {
  const models::ModelShape s = run.model.shape();
  const int64_t hidden = s.hidden_size, layers = s.layers_held;
  if (hidden <= 0 || layers <= 0) return 0;
  const int64_t intermediate = s.intermediate_size > 0 ? s.intermediate_size : 4 * hidden;
  const int64_t heads = std::max<int64_t>(s.heads, 1);
  const int64_t kv_heads = s.kv_heads > 0 ? s.kv_heads : heads;
  const int64_t head_dim = s.head_dim > 0 ? s.head_dim : hidden / heads;
  const double compute_bytes = bytes_of(run.precision.compute_dtype);
  const double tokens = static_cast<double>(run.cfg.training.local_batch_size * run.local_sequence);
  // Tensor parallelism splits a layer's tensors; under sequence parallelism local_sequence
  // has split the tokens already.
  const bool sequence_split = run.cfg.parallelism.enable_sequence_parallel && run.dims.tp > 1;
  const double per_token_layer =
      static_cast<double>(6 * hidden + 2 * (heads + kv_heads) * head_dim + 3 * intermediate) *
      compute_bytes / static_cast<double>(sequence_split ? 1 : std::max<int64_t>(run.dims.tp, 1));
  const double whole_layer = tokens * per_token_layer;
  const double layer_input = tokens * static_cast<double>(hidden) * compute_bytes;
  const std::string& mode = run.cfg.activation_checkpoint.mode;
  if (mode == "full") return static_cast<double>(layers) * layer_input + whole_layer;
  if (mode == "selective") return static_cast<double>(layers) * whole_layer / 2.0;
  return static_cast<double>(layers) * whole_layer;
}

// Bytes of the optimizer's moments for a parameter of `numel` elements in all (`held` of them
// on this rank): AdamW's two in the parameter dtype; AdamW8bit's two bytes and two float32
// scales per block of 256, or two float32 moments below optimizer.min_8bit_size.
double moment_bytes(const config::OptimizerConfig& o, double numel, double held,
                    double param_bytes) {
  if (o.name != "AdamW8bit") return 2 * held * param_bytes;
  if (numel < static_cast<double>(o.min_8bit_size)) return 8 * held;
  return 2 * held + 8 * std::ceil(held / 256.0);
}

ModelStateEstimate estimate(const MemoryFitRun& run, bool lora, const std::string& quantization) {
  const config::TrainerConfig& cfg = run.cfg;
  const Precision& precision = run.precision;
  const distributed::ParallelDims& dims = run.dims;
  ModelStateEstimate e;
  const double param_bytes = bytes_of(precision.param_dtype);
  const NamedTensors params = run.model.named_parameters();
  if (!lora) {
    for (const auto& [name, p] : params) {
      const double numel = static_cast<double>(p.numel()), held = numel / split_of(p, dims);
      e.parameters += held * param_bytes;
      e.optimizer += moment_bytes(cfg.optimizer, numel, held, param_bytes);
    }
  } else {
    std::map<std::string, at::Tensor> by_name(params.begin(), params.end());
    models::LoraHost* host = run.model.lora_host();
    TITAN_CHECK(host != nullptr, "model.converters = [\"lora\"]: this model has no LoRA support");
    config::LoraConfig settings = cfg.lora;
    settings.base_quantization = quantization;
    std::map<std::string, bool> adapted;
    for (const lora::Target& t : lora::select_targets(host->adaptable_weights(), settings))
      adapted[t.name] = t.experts;
    const double r = static_cast<double>(cfg.lora.rank);
    const bool nf4 = quantization == "nf4";
    for (const auto& [name, p] : params) {
      if (models::is_lora_name(name)) continue;
      const double numel = static_cast<double>(p.numel());
      if (auto a = adapted.find(name); a != adapted.end()) {
        // A [r, in] and B [out, r], per expert for a stack [E, out, in].
        const double experts = a->second ? static_cast<double>(p.size(0)) : 1.0;
        const double in = static_cast<double>(p.size(-1)), out = static_cast<double>(p.size(-2));
        const double tp = static_cast<double>(dims.tp);
        e.parameters += experts * r * (in + out) * param_bytes / tp;
        for (const double side : {in, out})  // A [r, in] and B [out, r]
          e.optimizer +=
              moment_bytes(cfg.optimizer, experts * r * side, experts * r * side / tp, param_bytes);
      }
      if (nf4 && host->quantizable(name)) {
        e.frozen += nf4_bytes(numel, cfg.lora.double_quantization) / static_cast<double>(dims.tp);
      } else {
        e.frozen += numel * bytes_of(precision.compute_dtype) / split_of(p, dims);
      }
    }
  }
  e.gradients = e.parameters;
  e.activations = activation_bytes(run);
  return e;
}

double meminfo_available() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  double kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024.0;
  return 0;
}

// The cgroup (v2) limit less what the group already uses; 0 when there is none.
double cgroup_available() {
  std::ifstream max_file("/sys/fs/cgroup/memory.max"),
      current_file("/sys/fs/cgroup/memory.current");
  std::string max_text;
  double current = 0;
  if (!(max_file >> max_text) || max_text == "max" || !(current_file >> current)) return 0;
  const double limit = std::strtod(max_text.c_str(), nullptr);
  return limit > current ? limit - current : 0;
}

}  // namespace

std::string format_gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

ModelStateEstimate estimate_model_state(const MemoryFitRun& run) {
  const auto& converters = run.cfg.model.converters;
  const bool lora = std::find(converters.begin(), converters.end(), "lora") != converters.end();
  return estimate(run, lora, run.cfg.lora.base_quantization);
}

ModelStateEstimate estimate_with_lora(const MemoryFitRun& run,
                                      const std::string& base_quantization) {
  return estimate(run, true, base_quantization);
}

double available_memory_bytes(at::Device device, int64_t local_ranks) {
  if (device.is_cuda()) return cuda_free_bytes(device.index() < 0 ? 0 : device.index());
  double available = meminfo_available();
  if (const double group = cgroup_available(); group > 0)
    available = available > 0 ? std::min(available, group) : group;
  return available / static_cast<double>(std::max<int64_t>(local_ranks, 1));
}

std::string check_memory_fits(const ModelStateEstimate& e, double available,
                              const MemoryFitRun& run) {
  const config::TrainerConfig& cfg = run.cfg;
  const Precision& precision = run.precision;
  const distributed::ParallelDims& dims = run.dims;
  if (available <= 0) return "";
  const bool lora = std::find(cfg.model.converters.begin(), cfg.model.converters.end(), "lora") !=
                    cfg.model.converters.end();
  const std::string where = precision.device.is_cuda() ? "this GPU has " : "this machine has ";
  if (e.model_state() > available) {
    std::ostringstream out;
    out << "the model state needs about " << format_gib(e.model_state()) << " on each rank (";
    if (lora) {
      out << "the frozen base " << format_gib(e.frozen) << ", the adapters, their gradients and "
          << cfg.optimizer.name << " moments "
          << format_gib(e.parameters + e.gradients + e.optimizer);
    } else {
      out << format_gib(e.parameters) << " of parameters in "
          << c10::toString(precision.param_dtype) << ", as much again of gradients, "
          << format_gib(e.optimizer) << " of " << cfg.optimizer.name << " moments";
    }
    out << "), but " << where << format_gib(available) << " available"
        << (precision.device.is_cuda() ? "" : " for each of its processes") << ". What would fit:";
    bool any = false;
    auto suggest = [&](const std::string& quantization, const std::string& flags) {
      const ModelStateEstimate alt = estimate_with_lora(run, quantization);
      if (alt.model_state() >= e.model_state()) return;
      out << (any ? ";" : "") << " " << flags << " (about " << format_gib(alt.model_state())
          << (alt.model_state() <= available ? ", fits" : ", does not fit either") << ")";
      any = true;
    };
    if (cfg.optimizer.name != "AdamW8bit") {
      config::TrainerConfig eight_bit = cfg;
      eight_bit.optimizer.name = "AdamW8bit";
      const MemoryFitRun eight_bit_run{run.model, eight_bit, run.precision, run.dims,
                                       run.local_sequence};
      const ModelStateEstimate alt = estimate(eight_bit_run, lora, cfg.lora.base_quantization);
      out << " 8-bit optimizer states: --optimizer.name AdamW8bit (about "
          << format_gib(alt.model_state())
          << (alt.model_state() <= available ? ", fits" : ", does not fit either") << ")";
      any = true;
    }
    try {
      if (!lora) suggest("none", "LoRA: --model.converters lora");
      if (!lora || cfg.lora.base_quantization != "nf4")
        suggest("nf4", "QLoRA: --model.converters lora --lora.base_quantization nf4");
    } catch (const Error&) {
      // No LoRA for this model: only sharding is left to suggest.
    }
    const double ranks =
        std::ceil(e.model_state() * static_cast<double>(dims.dp_shard) / available);
    out << (any ? ";" : "") << " or shard it over at least " << static_cast<int64_t>(ranks)
        << " ranks with their own memory (parallelism.data_parallel_shard_degree, on "
        << (precision.device.is_cuda() ? "that many GPUs" : "several machines") << ")";
    fail(out.str());
  }
  if (cfg.activation_checkpoint.mode != "full" && e.model_state() + e.activations > available) {
    return "the model state (about " + format_gib(e.model_state()) +
           ") and one micro-batch's activations (about " + format_gib(e.activations) +
           ") may not fit in the " + format_gib(available) +
           " available: activation_checkpoint.mode full (or selective) keeps less, as does a "
           "smaller training.local_batch_size or seq_len";
  }
  return "";
}

}  // namespace titan::train
