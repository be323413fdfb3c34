#include "titan/lora/lora_model.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <map>
#include <optional>
#include <sstream>

#include "titan/checkpoint/hf_import.h"
#include "titan/common/error.h"
#include "titan/lora/peft_adapter.h"
#include "titan/models/common/lora.h"
#include "titan/models/materialize.h"

namespace titan::lora {
namespace {

models::LoraOptions options_of(const config::LoraConfig& lora) {
  models::LoraOptions o;
  o.rank = lora.rank;
  o.alpha = lora.alpha;
  o.dropout = lora.dropout;
  return o;
}

models::LoraHost& host_of(models::Model& model) {
  models::LoraHost* host = model.lora_host();
  TITAN_CHECK(host != nullptr, "model.converters = [\"lora\"]: this model has no LoRA support");
  return *host;
}

// The options adapters are made with: the parameters' dtype, on the model's device (the base
// weights may still be shapes only).
at::TensorOptions adapter_options(models::Model& model, const std::vector<Target>& targets,
                                  at::Device device) {
  for (auto& [name, p] : model.named_parameters()) {
    if (targets.empty() || name != targets.front().name) continue;
    return p.is_meta() ? at::TensorOptions(device).dtype(p.scalar_type()) : p.options();
  }
  TITAN_CHECK(targets.empty(), "LoRA target ", targets.front().name, " is not a parameter");
  return at::TensorOptions(device);
}

// Adds the adapters and freezes everything else; a base with values is held in `frozen_dtype`
// (in place: the tensors stay the same objects), one on the meta device gets it when
// materialized.
void add_and_freeze(models::Model& model, const std::vector<Target>& targets,
                    const config::LoraConfig& lora, at::ScalarType frozen_dtype,
                    at::Device device) {
  std::vector<std::string> names;
  for (const Target& t : targets) names.push_back(t.name);
  host_of(model).add_adapters(names, options_of(lora), adapter_options(model, targets, device));
  at::NoGradGuard no_grad;
  for (auto& [name, p] : model.named_parameters()) {
    const bool adapter = models::is_lora_name(name);
    p.requires_grad_(adapter);
    if (!adapter && !p.is_meta() && p.is_floating_point() && p.scalar_type() != frozen_dtype)
      p.set_data(p.to(frozen_dtype));
  }
}

// Counts from the shapes alone: an NF4 weight is [out, in] elements, never dequantised here.
void count(models::Model& model, LoraSetup& setup) {
  setup.trainable_parameters = setup.frozen_parameters = 0;
  int64_t frozen_bytes = 0;
  for (const auto& [name, p] : model.named_parameters()) {
    if (p.requires_grad()) {
      setup.trainable_parameters += p.numel();
    } else {
      setup.frozen_parameters += p.numel();
      frozen_bytes += p.numel() * static_cast<int64_t>(p.element_size());
    }
  }
  for (const auto& [name, shape] : host_of(model).nf4_weights())
    setup.frozen_parameters += shape.at(0) * shape.at(1);
  setup.base_bytes = setup.nf4_bytes + frozen_bytes;
}

void check_quantized(const LoraSetup& setup) {
  TITAN_CHECK(setup.config.base_quantization != "nf4" || setup.nf4_bytes > 0,
              "lora.base_quantization = \"nf4\": the model has no frozen "
              "linear weight to quantise");
}

// A base with values: QLoRA quantises its frozen projections now.
void quantize_if_asked(models::Model& model, LoraSetup& setup) {
  setup.nf4_bytes = 0;
  if (setup.config.base_quantization == "nf4")
    setup.nf4_bytes = host_of(model).quantize_frozen_linears(setup.config.double_quantization);
  check_quantized(setup);
  count(model, setup);
}

// A base on the meta device: every frozen weight gets its value, one at a time, in
// `frozen_dtype` (through the parameters' dtype, as a loaded and then converted base would),
// and under QLoRA each projection is quantised as soon as it exists.
void materialize_base(models::Model& model, LoraSetup& setup, const BaseWeights& weights,
                      at::ScalarType frozen_dtype) {
  std::optional<checkpoint::HfWeights> hf;
  models::ParameterSource source;
  if (weights.hf_folder.empty()) {
    source = models::seeded_initialisation(model, weights.seed);
  } else {
    TITAN_CHECK(weights.spec != nullptr, "LoRA: no model spec to read ", weights.hf_folder);
    NamedTensors expected;
    for (auto& [name, p] : model.named_parameters())
      if (!models::is_lora_name(name)) expected.emplace_back(name, p.to(at::kMeta));
    hf.emplace(weights.hf_folder, *weights.spec, expected);
    source = [&hf](const std::string& name, const at::Tensor&) { return hf->read(name); };
  }
  models::LoraHost& host = host_of(model);
  const bool nf4 = setup.config.base_quantization == "nf4";
  const bool double_quantization = setup.config.double_quantization;
  setup.nf4_bytes = 0;
  models::MaterializeOptions options;
  options.device = weights.device;
  options.dtype = [frozen_dtype](const std::string&) { return frozen_dtype; };
  options.after_parameter = [&](const std::string& name, at::Tensor&) {
    if (nf4 && host.quantizable(name))
      setup.nf4_bytes += host.quantize_weight(name, double_quantization);
  };
  options.after_module = [&hf] {
    if (hf) hf->release_pages();
  };
  // The value goes to the frozen dtype in one copy: a bfloat16 file's embedding is never held
  // in float32 on the way (a 1.5 GB detour at Qwen3-4B's vocabulary).
  models::materialize(model, source, options);
  check_quantized(setup);
  count(model, setup);
}

// The frozen base: materialized (a meta-built model) or converted in place.
void hold_base(models::Model& model, LoraSetup& setup, const BaseWeights& weights,
               at::ScalarType frozen_dtype) {
  if (models::has_meta_parameters(model)) {
    materialize_base(model, setup, weights, frozen_dtype);
  } else {
    quantize_if_asked(model, setup);
  }
}

}  // namespace

bool lora_enabled(const config::TrainerConfig& cfg) {
  return std::find(cfg.model.converters.begin(), cfg.model.converters.end(), "lora") !=
         cfg.model.converters.end();
}

LoraSetup apply_lora(models::Model& model, const config::LoraConfig& lora,
                     const BaseFingerprint& base, const BaseWeights& weights, uint64_t seed,
                     at::ScalarType compute_dtype) {
  LoraSetup setup;
  setup.config = lora;
  setup.base = base;
  setup.targets = select_targets(host_of(model).adaptable_weights(), lora);
  add_and_freeze(model, setup.targets, lora, compute_dtype, weights.device);
  // Initialised on the CPU in float32 from one generator, in the model's order: the same
  // adapters on every rank and for every layout.
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed ^ 0x10AA5EEDULL);
  std::map<std::string, at::Tensor> params;
  for (auto& [name, p] : model.named_parameters()) params[name] = p;
  for (const Target& t : setup.targets)
    models::initialise_adapter(params.at(models::lora_a_name(t.name)),
                               params.at(models::lora_b_name(t.name)), gen);
  params.clear();  // (holds no base weight while the base is materialized)
  if (!lora.initial_adapter_path.empty())
    read_peft_adapter(lora.initial_adapter_path, model, setup.targets, lora);
  hold_base(model, setup, weights, compute_dtype);
  return setup;
}

void reapply_lora(models::Model& model, const LoraSetup& saved, const BaseWeights& weights,
                  at::ScalarType compute_dtype) {
  LoraSetup setup = saved;
  add_and_freeze(model, setup.targets, setup.config, compute_dtype, weights.device);
  hold_base(model, setup, weights, compute_dtype);
}

nlohmann::json LoraSetup::to_json() const {
  nlohmann::json targets_json = nlohmann::json::array();
  for (const Target& t : targets)
    targets_json.push_back({{"name", t.name}, {"module", t.module}, {"experts", t.experts}});
  return {{"rank", config.rank},
          {"alpha", config.alpha},
          {"dropout", config.dropout},
          {"target_modules", config.target_modules},
          {"base_quantization", config.base_quantization},
          {"double_quantization", config.double_quantization},
          {"targets", targets_json},
          {"base", base.to_json()}};
}

LoraSetup LoraSetup::from_json(const nlohmann::json& j, const std::string& where) {
  LoraSetup s;
  try {
    s.config.rank = j.at("rank").get<int64_t>();
    s.config.alpha = j.at("alpha").get<double>();
    s.config.dropout = j.at("dropout").get<double>();
    s.config.target_modules = j.at("target_modules").get<std::vector<std::string>>();
    s.config.base_quantization = j.at("base_quantization").get<std::string>();
    s.config.double_quantization = j.at("double_quantization").get<bool>();
    for (const auto& t : j.at("targets"))
      s.targets.push_back({t.at("name").get<std::string>(), t.at("module").get<std::string>(),
                           t.at("experts").get<bool>()});
  } catch (const nlohmann::json::exception& e) {
    TITAN_CHECK(false, where, ": malformed LoRA description: ", e.what());
  }
  s.base = BaseFingerprint::from_json(j.value("base", nlohmann::json()), where);
  return s;
}

std::string describe(const LoraSetup& s) {
  std::ostringstream out;
  out.setf(std::ios::fixed);
  out.precision(2);
  const double total = static_cast<double>(s.trainable_parameters + s.frozen_parameters);
  int64_t experts = 0;
  for (const Target& t : s.targets) experts += t.experts ? 1 : 0;
  out << "LoRA rank " << s.config.rank << ", alpha " << s.config.alpha << ": "
      << s.targets.size() - experts << " linear weights";
  if (experts > 0) out << " and " << experts << " expert stacks";
  out << " adapted, " << s.trainable_parameters << " trainable parameters ("
      << (total > 0 ? 100.0 * static_cast<double>(s.trainable_parameters) / total : 0.0) << "% of "
      << static_cast<int64_t>(total) << "); the frozen base takes "
      << static_cast<double>(s.base_bytes) / (1024.0 * 1024.0) << " MiB";
  if (s.config.base_quantization == "nf4")
    out << " with its projections in NF4"
        << (s.config.double_quantization ? " (double-quantised scales)" : "");
  out << " (" << s.base.source << ")";
  return out.str();
}

NamedTensors trainable_parameters(models::ModelTensors& model) {
  NamedTensors out;
  for (auto& [name, p] : model.named_parameters())
    if (p.requires_grad()) out.emplace_back(name, p);
  return out;
}

}  // namespace titan::lora
