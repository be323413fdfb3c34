#include "titan/lora/lora_model.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <map>
#include <sstream>

#include "titan/common/error.h"
#include "titan/lora/peft_adapter.h"
#include "titan/models/common/lora.h"

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

// Adds the adapters, freezes everything else and holds it in `frozen_dtype` (in place: the
// tensors stay the same objects).
void add_and_freeze(models::Model& model, const std::vector<Target>& targets,
                    const config::LoraConfig& lora, at::ScalarType frozen_dtype) {
  std::vector<std::string> names;
  for (const Target& t : targets) names.push_back(t.name);
  host_of(model).add_adapters(names, options_of(lora));
  at::NoGradGuard no_grad;
  for (auto& [name, p] : model.named_parameters()) {
    const bool adapter = models::is_lora_name(name);
    p.requires_grad_(adapter);
    if (!adapter && p.is_floating_point() && p.scalar_type() != frozen_dtype)
      p.set_data(p.to(frozen_dtype));
  }
}

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
  for (const auto& [name, w] : host_of(model).dequantized_weights())
    setup.frozen_parameters += w.numel();
  setup.base_bytes += frozen_bytes;
}

void quantize_if_asked(models::Model& model, LoraSetup& setup) {
  setup.nf4_bytes = 0;
  if (setup.config.base_quantization == "nf4") {
    setup.nf4_bytes = host_of(model).quantize_frozen_linears(setup.config.double_quantization);
    TITAN_CHECK(setup.nf4_bytes > 0,
                "lora.base_quantization = \"nf4\": the model has no frozen "
                "linear weight to quantise");
  }
  setup.base_bytes = setup.nf4_bytes;
  count(model, setup);
}

}  // namespace

bool lora_enabled(const config::TrainerConfig& cfg) {
  return std::find(cfg.model.converters.begin(), cfg.model.converters.end(), "lora") !=
         cfg.model.converters.end();
}

LoraSetup apply_lora(models::Model& model, const config::LoraConfig& lora,
                     const BaseFingerprint& base, uint64_t seed, at::ScalarType compute_dtype) {
  LoraSetup setup;
  setup.config = lora;
  setup.base = base;
  setup.targets = select_targets(host_of(model).adaptable_weights(), lora);
  add_and_freeze(model, setup.targets, lora, compute_dtype);
  // Initialised on the CPU in float32 from one generator, in the model's order: the same
  // adapters on every rank and for every layout.
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed ^ 0x10AA5EEDULL);
  std::map<std::string, at::Tensor> params;
  for (auto& [name, p] : model.named_parameters()) params[name] = p;
  for (const Target& t : setup.targets)
    models::initialise_adapter(params.at(models::lora_a_name(t.name)),
                               params.at(models::lora_b_name(t.name)), gen);
  if (!lora.initial_adapter_path.empty())
    read_peft_adapter(lora.initial_adapter_path, model, setup.targets, lora);
  quantize_if_asked(model, setup);
  return setup;
}

void reapply_lora(models::Model& model, const LoraSetup& saved, at::ScalarType compute_dtype) {
  LoraSetup setup = saved;
  add_and_freeze(model, setup.targets, setup.config, compute_dtype);
  quantize_if_asked(model, setup);
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

NamedTensors trainable_parameters(models::Model& model) {
  NamedTensors out;
  for (auto& [name, p] : model.named_parameters())
    if (p.requires_grad()) out.emplace_back(name, p);
  return out;
}

}  // namespace titan::lora
