#include "titan/checkpoint/model_part.h"

#include "titan/common/error.h"

namespace titan::checkpoint {

nlohmann::json ModelPartDescription::to_json() const {
  nlohmann::json out = {
      {"name", name}, {"hf_config", hf_config}, {"hf_assets_path", hf_assets_path}};
  if (!lora.is_null()) out["lora"] = lora;
  return out;
}

ModelPartDescription ModelPartDescription::from_json(const nlohmann::json& state,
                                                     const std::string& manifest) {
  TITAN_CHECK(state.is_object() && state.contains("hf_config") && state["hf_config"].is_object(),
              manifest, ": no model description (state.model.hf_config)");
  ModelPartDescription d;
  d.hf_config = state["hf_config"];
  if (state.contains("name")) {
    TITAN_CHECK(state["name"].is_string(), manifest, ": state.model.name must be a string");
    d.name = state["name"].get<std::string>();
  }
  if (state.contains("hf_assets_path") && state["hf_assets_path"].is_string())
    d.hf_assets_path = state["hf_assets_path"].get<std::string>();
  if (state.contains("lora")) d.lora = state["lora"];
  return d;
}

}  // namespace titan::checkpoint
