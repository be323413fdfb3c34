// model.flavor and model.hf_assets_path -> the dimensions a job trains, the same rule for every
// family: "auto" takes everything from <hf_assets_path>/config.json (which must exist); a named
// flavor is checked against that file when there is one (the first differing architectural
// field named, with both values) and takes its token ids and max_position_embeddings from it;
// without a file, the flavor alone.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>

#include "titan/common/error.h"
#include "titan/config/trainer_config.h"

namespace titan::models {

// <hf_assets_path>/config.json, parsed when it exists (invalid JSON is an error naming it).
struct AssetsConfig {
  std::string path;
  std::optional<nlohmann::json> json;
};
AssetsConfig read_assets_config(const config::ModelConfig& model);

// Compares a flavor's field with the file's; the first difference throws naming the field, both
// values and the way out (--model.flavor auto).
class FlavorComparison {
 public:
  FlavorComparison(std::string flavor_name, std::string file_path)
      : flavor_(std::move(flavor_name)), file_(std::move(file_path)) {}
  void ints(const char* field, int64_t flavor, int64_t file) const;
  void doubles(const char* field, double flavor, double file) const;
  void bools(const char* field, bool flavor, bool file) const;
  void strings(const char* field, const std::string& flavor, const std::string& file) const;

 private:
  [[noreturn]] void mismatch(const char* field, const std::string& a, const std::string& b) const;
  std::string flavor_, file_;
};

// The rule above for a family's Args (with bos_token_id, eos_token_id, pad_token_id and
// max_position_embeddings): `flavor(name)` gives a named flavor, `from_hf(json, path)` reads a
// config.json, `check_same(flavor_args, name, file_args, path)` compares their architectures.
template <class Args>
Args resolve_flavor(const config::ModelConfig& model, Args (*flavor)(const std::string&),
                    Args (*from_hf)(const nlohmann::json&, const std::string&),
                    void (*check_same)(const Args&, const std::string&, const Args&,
                                       const std::string&)) {
  const AssetsConfig file = read_assets_config(model);
  if (model.flavor == "auto") {
    TITAN_CHECK(file.json.has_value(), "model.flavor auto needs ", file.path,
                ", which does not exist (set model.hf_assets_path or a named flavor)");
    return from_hf(*file.json, file.path);
  }
  Args args = flavor(model.flavor);
  if (!file.json) return args;
  const Args from_file = from_hf(*file.json, file.path);
  check_same(args, model.flavor, from_file, file.path);
  args.bos_token_id = from_file.bos_token_id;
  args.eos_token_id = from_file.eos_token_id;
  args.pad_token_id = from_file.pad_token_id;
  args.max_position_embeddings = from_file.max_position_embeddings;
  return args;
}

}  // namespace titan::models
