#include "titan/train/state/checkpoint_parts.h"

#include <ATen/CPUGeneratorImpl.h>

#include <filesystem>
#include <map>
#include <set>

#include "titan/checkpoint/model_part.h"
#include "titan/checkpoint/model_tensors.h"
#include "titan/common/error.h"
#include "titan/common/strings.h"
#include "titan/train/state/optimizer_state_reader.h"

namespace fs = std::filesystem;

namespace titan::train {

NamedTensors ModelState::tensors() const {
  if (lora_ == nullptr) return checkpoint::model_tensors(model_);
  // The frozen base is not saved: its fingerprint is.
  NamedTensors out = lora::trainable_parameters(model_);
  for (auto& b : model_.named_buffers()) out.push_back(b);
  return out;
}

PartState ModelState::save() const {
  PartState out;
  out.tensors = tensors();
  // Enough to rebuild the model without the job's config (titan convert / eval / generate).
  checkpoint::ModelPartDescription description;
  description.name = spec_.name;
  description.hf_config = model_.hf_config("float32");
  description.hf_assets_path = fs::absolute(cfg_.model.hf_assets_path).string();
  if (lora_ != nullptr) description.lora = lora_->to_json();
  out.state = description.to_json();
  return out;
}

void ModelState::load(const PartReader& in) {
  const nlohmann::json state = in.state();
  const bool saved_lora = state.is_object() && state.contains("lora");
  TITAN_CHECK(saved_lora == (lora_ != nullptr), in.source(),
              saved_lora
                  ? " holds LoRA adapters, not a whole model: resume it with model.converters "
                    "= [\"lora\"] and its lora settings"
                  : " holds a whole model, not LoRA adapters: resume it without "
                    "model.converters = [\"lora\"]");
  if (lora_ != nullptr) {
    const lora::LoraSetup saved =
        lora::LoraSetup::from_json(state["lora"], in.source() + "/manifest.json");
    lora::check_same_base(saved.base, lora_->base, in.source());
  }
  NamedTensors tensors = this->tensors();
  std::set<std::string> ours;
  for (const auto& [name, local] : tensors) {
    ours.insert(name);
    TITAN_CHECK(in.contains(name), in.source(), ": missing tensor '", name, "'");
  }
  for (const std::string& name : in.names())
    TITAN_CHECK(ours.count(name) || (held_elsewhere_ && held_elsewhere_(name)), in.source(),
                ": unexpected tensor '", name, "'");
  for (auto& [name, local] : tensors) in.read_into(name, local);
}

void OptimizerState::load(const PartReader& in) {
  const NamedTensors state =
      read_optimizer_state(in, optimizer_, model_.named_parameters(), held_elsewhere_);
  if (!state.empty()) optimizer_.load_state(state);
}

PartState TrainState::save() const { return {{}, {{"step", step}, {"tokens_seen", tokens_seen}}}; }

void TrainState::load(const PartReader& in) {
  const nlohmann::json s = in.state();
  if (s.is_null()) return;
  TITAN_CHECK(s.is_object() && (!s.contains("tokens_seen") || s["tokens_seen"].is_number_integer()),
              in.source(), "/manifest.json: state.train_state.tokens_seen must be an integer");
  tokens_seen = s.value("tokens_seen", int64_t{0});
}

void DataLoaderState::load(const PartReader& in) {
  const nlohmann::json s = in.state();
  if (!s.is_null()) loader_.load_state(s);
}

std::string DataLoaderState::load_torchtitan(const nlohmann::json& position) {
  if (position.is_null()) return "";  // the checkpoint's notes say why it has none
  try {
    const nlohmann::json& rank = position.at("ranks").at(0);
    return loader_.load_torchtitan_position(
        position.at("world_size").get<int64_t>(), rank.at("sample_idx").get<int64_t>(),
        rank.at("epoch").get<int64_t>(), rank.at("inputs_buffer").get<std::vector<int64_t>>(),
        rank.at("labels_buffer").get<std::vector<int64_t>>());
  } catch (const nlohmann::json::exception&) {
    return "its dataset state is not torchtitan 0.3.0's text dataset's";
  }
}

PartState RngState::save() const {
  return {{{"cpu", at::detail::getDefaultCPUGenerator().get_state()}}, nullptr};
}

void RngState::load(const PartReader& in) {
  if (!in.contains("cpu")) return;
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  gen.set_state(in.read("cpu"));
}

}  // namespace titan::train
