// Reading and writing a Hugging Face config.json, the parts every family shares: typed reads
// that name the key and the file on a wrong JSON type, the RoPE dictionary as transformers 5.17
// picks it (v5 rope_parameters or v4 rope_theta / rope_scaling), and the keys both v4 and v5
// read on the way out. Each family's own keys and defaults stay in its <family>_hf_config.cpp.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace titan::models {

// Typed reads of one JSON object: an absent or null key leaves the value as it is (the family's
// default); a value of another JSON type is an error naming the key and `source`.
class HfConfigReader {
 public:
  HfConfigReader(const nlohmann::json& json, std::string source)
      : json_(json), source_(std::move(source)) {}

  bool has(const std::string& key) const { return json_.contains(key) && !json_.at(key).is_null(); }
  // Present, null included (HF keeps an explicit null where it would otherwise use a default).
  bool contains(const std::string& key) const { return json_.contains(key); }
  const nlohmann::json& at(const std::string& key) const { return json_.at(key); }

  void read_int(const std::string& key, int64_t& out) const;
  void read_double(const std::string& key, double& out) const;
  void read_bool(const std::string& key, bool& out) const;
  void read_string(const std::string& key, std::string& out) const;
  void read_optional_int(const std::string& key, std::optional<int64_t>& out) const;
  // An int or a list of ints (eos_token_id may be either).
  void read_int_list(const std::string& key, std::vector<int64_t>& out) const;

  [[noreturn]] void wrong_type(const std::string& key, const char* expected,
                               const nlohmann::json& value) const;
  const std::string& source() const { return source_; }

 private:
  const nlohmann::json& json_;
  std::string source_;
};

// The RoPE dictionary as PreTrainedConfig.convert_rope_params_to_dict settles it: a non-empty
// legacy rope_scaling replaces rope_parameters; rope_theta comes from that dictionary, else the
// top-level key, else 10000; the type from its rope_type, else its legacy type, else "default".
struct HfRopeParameters {
  nlohmann::json params = nlohmann::json::object();
  std::string key = "rope_parameters";  // where params came from, for messages
  double theta = 10000.0;
  std::string type = "default";
};
HfRopeParameters read_hf_rope_parameters(const HfConfigReader& reader);

// Writes rope_theta and rope_scaling (what v4 reads) and rope_parameters (v5): `scaling` holds
// the type's own keys with rope_type; null for the default rotation.
void write_hf_rope(nlohmann::json& config, double theta, const std::string& type,
                   const nlohmann::json& scaling);
// bos/eos/pad token ids as transformers writes them: null when unset, a single eos as an int.
void write_hf_token_ids(nlohmann::json& config, const std::optional<int64_t>& bos,
                        const std::vector<int64_t>& eos, const std::optional<int64_t>& pad);

}  // namespace titan::models
