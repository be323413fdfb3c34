#include "titan/models/common/hf_config_reader.h"

#include "titan/common/error.h"

namespace titan::models {

void HfConfigReader::read_int(const std::string& key, int64_t& out) const {
  if (!has(key)) return;
  const auto& v = json_.at(key);
  if (!v.is_number_integer()) wrong_type(key, "an integer", v);
  out = v.get<int64_t>();
}

void HfConfigReader::read_double(const std::string& key, double& out) const {
  if (!has(key)) return;
  const auto& v = json_.at(key);
  if (!v.is_number()) wrong_type(key, "a number", v);
  out = v.get<double>();
}

void HfConfigReader::read_bool(const std::string& key, bool& out) const {
  if (!has(key)) return;
  const auto& v = json_.at(key);
  if (!v.is_boolean()) wrong_type(key, "true or false", v);
  out = v.get<bool>();
}

void HfConfigReader::read_string(const std::string& key, std::string& out) const {
  if (!has(key)) return;
  const auto& v = json_.at(key);
  if (!v.is_string()) wrong_type(key, "a string", v);
  out = v.get<std::string>();
}

void HfConfigReader::read_optional_int(const std::string& key, std::optional<int64_t>& out) const {
  if (!has(key)) return;
  int64_t value = 0;
  read_int(key, value);
  out = value;
}

void HfConfigReader::read_int_list(const std::string& key, std::vector<int64_t>& out) const {
  if (!has(key)) return;
  const auto& v = json_.at(key);
  out.clear();
  if (v.is_number_integer()) {
    out.push_back(v.get<int64_t>());
    return;
  }
  if (!v.is_array()) wrong_type(key, "an integer or a list of integers", v);
  for (const auto& item : v) {
    if (!item.is_number_integer()) wrong_type(key, "a list of integers", v);
    out.push_back(item.get<int64_t>());
  }
}

void HfConfigReader::wrong_type(const std::string& key, const char* expected,
                                const nlohmann::json& value) const {
  fail(source_, ": key '", key, "' must be ", expected, ", got ", value.dump());
}

HfRopeParameters read_hf_rope_parameters(const HfConfigReader& reader) {
  HfRopeParameters out;
  if (reader.has("rope_scaling")) {
    const auto& scaling = reader.at("rope_scaling");
    if (!scaling.is_object()) reader.wrong_type("rope_scaling", "an object or null", scaling);
    if (!scaling.empty()) {
      out.params = scaling;
      out.key = "rope_scaling";
    }
  }
  if (out.key == "rope_parameters" && reader.has("rope_parameters")) {
    out.params = reader.at("rope_parameters");
    if (!out.params.is_object())
      reader.wrong_type("rope_parameters", "an object or null", out.params);
  }
  reader.read_double("rope_theta", out.theta);
  const HfConfigReader nested(out.params, reader.source() + " (" + out.key + ")");
  nested.read_double("rope_theta", out.theta);
  nested.read_string("type", out.type);
  nested.read_string("rope_type", out.type);
  return out;
}

void write_hf_rope(nlohmann::json& config, double theta, const std::string& type,
                   const nlohmann::json& scaling) {
  nlohmann::json rope = {{"rope_theta", theta}, {"rope_type", type}};
  config["rope_theta"] = theta;
  config["rope_scaling"] = scaling;
  if (!scaling.is_null()) rope.update(scaling);
  config["rope_parameters"] = rope;
}

void write_hf_token_ids(nlohmann::json& config, const std::optional<int64_t>& bos,
                        const std::vector<int64_t>& eos, const std::optional<int64_t>& pad) {
  using nlohmann::json;
  config["bos_token_id"] = bos ? json(*bos) : json(nullptr);
  if (eos.empty()) {
    config["eos_token_id"] = nullptr;
  } else if (eos.size() == 1) {
    config["eos_token_id"] = eos[0];
  } else {
    config["eos_token_id"] = eos;
  }
  config["pad_token_id"] = pad ? json(*pad) : json(nullptr);
}

}  // namespace titan::models
