#include "titan/lora/peft_adapter.h"

#include <ATen/core/grad_mode.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <set>

#include "titan/checkpoint/safetensors.h"
#include "titan/common/error.h"
#include "titan/common/file_util.h"
#include "titan/common/strings.h"
#include "titan/models/common/lora.h"

namespace fs = std::filesystem;

namespace titan::lora {
namespace {

constexpr const char* kPrefix = "base_model.model.";

// "model.layers.3.mlp.experts.down_proj" -> "model.layers.3.mlp.experts"
std::string parent(const std::string& module) { return module.substr(0, module.rfind('.')); }

bool both_stacks_adapted(const Target& target, const std::vector<Target>& targets) {
  int count = 0;
  for (const Target& t : targets)
    if (t.experts && parent(t.module) == parent(target.module)) ++count;
  return count == 2;
}

// target_modules as PEFT matches it: each linear target's last name when those names select
// exactly the targets, else the full module paths.
nlohmann::json peft_target_modules(const std::vector<Target>& targets,
                                   const std::vector<Target>& adaptable) {
  std::set<std::string> short_names, full;
  for (const Target& t : targets) {
    if (t.experts) continue;
    short_names.insert(t.module.substr(t.module.rfind('.') + 1));
    full.insert(t.module);
  }
  bool exact = true;
  for (const Target& t : adaptable) {
    if (t.experts) continue;
    if (short_names.count(t.module.substr(t.module.rfind('.') + 1)) && !full.count(t.module))
      exact = false;
  }
  nlohmann::json out = nlohmann::json::array();
  for (const std::string& name : exact ? short_names : full) out.push_back(name);
  return out;
}

}  // namespace

std::string peft_key(const Target& target, bool a, const std::vector<Target>& targets) {
  const std::string which = a ? "lora_A.weight" : "lora_B.weight";
  if (!target.experts) return kPrefix + target.module + "." + which;
  // PEFT wraps gate_up_proj first, so when both stacks are adapted it is the inner wrapper.
  const bool inner =
      both_stacks_adapted(target, targets) && target.module.ends_with(".gate_up_proj");
  return kPrefix + parent(target.module) + (inner ? ".base_layer." : ".") + which;
}

at::Tensor to_peft_layout(const Target& target, bool a, const at::Tensor& native) {
  if (!target.experts) return native;
  // A [E, r, in] -> [E*r, in]; B [E, out, r] -> [out, r*E] (column j*E + e is B[e][:, j]).
  if (a) return native.reshape({-1, native.size(2)});
  return native.permute({1, 2, 0}).reshape({native.size(1), -1});
}

at::Tensor from_peft_layout(const Target& target, bool a, const at::Tensor& peft, int64_t experts) {
  if (!target.experts) return peft;
  if (a) return peft.reshape({experts, -1, peft.size(1)});
  return peft.reshape({peft.size(0), -1, experts}).permute({2, 0, 1}).contiguous();
}

void write_peft_adapter(const std::string& dir, models::ModelTensors& model,
                        const std::vector<Target>& targets, const config::LoraConfig& lora,
                        const std::string& base_model_name,
                        const checkpoint::TensorLayout& layout) {
  models::LoraHost* host = model.lora_host();
  TITAN_CHECK(host != nullptr, "PEFT export: the model has no LoRA adapters");
  std::map<std::string, at::Tensor> params;
  for (auto& [name, p] : model.named_parameters()) params[name] = p;
  // Gathered on every rank, in the same order; kept by the coordinator only.
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  for (const Target& t : targets) {
    for (const bool a : {true, false}) {
      const std::string native = a ? models::lora_a_name(t.name) : models::lora_b_name(t.name);
      const auto it = params.find(native);
      TITAN_CHECK(it != params.end(), "PEFT export: the model has no adapter tensor ", native);
      const at::Tensor full = layout.full(native, it->second);
      if (layout.coordinator())
        tensors.emplace_back(
            peft_key(t, a, targets),
            to_peft_layout(t, a, full.detach().to(at::kCPU, at::kFloat)).contiguous());
    }
  }
  if (!layout.coordinator()) return;
  nlohmann::json parameters = nlohmann::json::array();
  for (const Target& t : targets)
    if (t.experts) parameters.push_back(t.module);
  const nlohmann::json config = {
      {"peft_type", "LORA"},
      {"task_type", "CAUSAL_LM"},
      {"r", lora.rank},
      {"lora_alpha", lora.alpha},
      {"lora_dropout", lora.dropout},
      {"target_modules", peft_target_modules(targets, host->adaptable_weights())},
      {"target_parameters", parameters.empty() ? nlohmann::json(nullptr) : parameters},
      {"base_model_name_or_path",
       base_model_name.empty() ? nlohmann::json(nullptr) : nlohmann::json(base_model_name)},
      {"bias", "none"},
      {"fan_in_fan_out", false},
      {"init_lora_weights", true},
      {"inference_mode", true},
      {"modules_to_save", nullptr},
      {"use_rslora", false},
      {"use_dora", false},
  };
  std::string target = dir;
  while (target.size() > 1 && target.back() == '/') target.pop_back();
  fs::create_directories(fs::path(target).parent_path().empty() ? fs::path(".")
                                                                : fs::path(target).parent_path());
  write_directory_atomically(target, [&](const std::string& staged) {
    checkpoint::write_safetensors((fs::path(staged) / "adapter_model.safetensors").string(),
                                  tensors);
    write_file_atomic((fs::path(staged) / "adapter_config.json").string(), config.dump(2) + "\n");
  });
}

void read_peft_adapter(const std::string& dir, models::ModelTensors& model,
                       const std::vector<Target>& targets, const config::LoraConfig& lora) {
  const fs::path config_path = fs::path(dir) / "adapter_config.json";
  TITAN_CHECK(fs::is_directory(dir), "lora.initial_adapter_path ", dir, ": not a directory");
  TITAN_CHECK(fs::is_regular_file(config_path), "lora.initial_adapter_path ", dir,
              ": no adapter_config.json (a PEFT adapter folder holds adapter_config.json and "
              "adapter_model.safetensors)");
  nlohmann::json config;
  try {
    config = nlohmann::json::parse(read_text_file(config_path.string()));
  } catch (const nlohmann::json::exception& e) {
    TITAN_CHECK(false, config_path.string(), " is not valid JSON: ", e.what());
  }
  TITAN_CHECK(config.is_object() && config.value("peft_type", std::string()) == "LORA",
              config_path.string(), ": peft_type must be \"LORA\"");
  TITAN_CHECK(config.contains("r") && config["r"].is_number_integer() &&
                  config["r"].get<int64_t>() == lora.rank,
              config_path.string(), ": r = ", config.value("r", nlohmann::json()).dump(),
              " but lora.rank = ", lora.rank, " (set lora.rank to the adapter's)");
  TITAN_CHECK(config.contains("lora_alpha") && config["lora_alpha"].is_number() &&
                  config["lora_alpha"].get<double>() == lora.alpha,
              config_path.string(),
              ": lora_alpha = ", config.value("lora_alpha", nlohmann::json()).dump(),
              " but lora.alpha = ", lora.alpha, " (set lora.alpha to the adapter's)");
  TITAN_CHECK(!config.value("use_dora", false) && !config.value("use_rslora", false),
              config_path.string(), ": DoRA and rsLoRA adapters are not supported");
  const fs::path weights = fs::path(dir) / "adapter_model.safetensors";
  TITAN_CHECK(fs::is_regular_file(weights), "lora.initial_adapter_path ", dir,
              ": no adapter_model.safetensors");
  const checkpoint::SafetensorsFile file = checkpoint::SafetensorsFile::open(weights.string());
  std::map<std::string, at::Tensor> params;
  for (auto& [name, p] : model.named_parameters()) params[name] = p;
  // Every tensor read and checked before any is written.
  std::vector<std::pair<at::Tensor, at::Tensor>> copies;
  std::set<std::string> expected;
  for (const Target& t : targets) {
    for (const bool a : {true, false}) {
      const std::string key = peft_key(t, a, targets);
      expected.insert(key);
      TITAN_CHECK(file.contains(key), weights.string(), ": missing tensor ", key,
                  " (the adapter does not target ", t.module, ")");
      const std::string native = a ? models::lora_a_name(t.name) : models::lora_b_name(t.name);
      at::Tensor& slot = params.at(native);
      const int64_t experts = t.experts ? slot.size(0) : 0;
      const at::Tensor stored = file.tensor(key);
      const at::Tensor expected_peft = to_peft_layout(t, a, at::empty(slot.sizes(), at::kMeta));
      TITAN_CHECK(stored.sizes() == expected_peft.sizes(), weights.string(), ": tensor ", key,
                  " has shape ", shape_to_string(stored.sizes()), " but this base model needs ",
                  shape_to_string(expected_peft.sizes()), " (an adapter for another base model?)");
      copies.emplace_back(slot, from_peft_layout(t, a, stored, experts));
    }
  }
  for (const checkpoint::TensorInfo& info : file.tensors())
    TITAN_CHECK(expected.count(info.name), weights.string(), ": unexpected tensor ", info.name,
                " (lora.target_modules does not select its module)");
  at::NoGradGuard no_grad;
  for (auto& [slot, value] : copies) slot.copy_(value);
}

}  // namespace titan::lora
