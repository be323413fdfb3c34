#include "titan/models/common/flavor_resolution.h"

#include <filesystem>
#include <fstream>
#include <sstream>

namespace titan::models {

AssetsConfig read_assets_config(const config::ModelConfig& model) {
  const std::filesystem::path path = std::filesystem::path(model.hf_assets_path) / "config.json";
  AssetsConfig out;
  out.path = path.string();
  if (model.hf_assets_path.empty() || !std::filesystem::exists(path)) return out;
  std::ifstream in(path);
  TITAN_CHECK(in, "cannot open ", out.path);
  try {
    out.json = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    fail(out.path, ": invalid JSON: ", e.what());
  }
  return out;
}

void FlavorComparison::mismatch(const char* field, const std::string& a,
                                const std::string& b) const {
  fail("model.flavor '", flavor_, "' does not match ", file_, ": ", field, " is ", a,
       " in the flavor but ", b, " in the file (use --model.flavor auto to take the file's)");
}

void FlavorComparison::ints(const char* field, int64_t flavor, int64_t file) const {
  if (flavor != file) mismatch(field, std::to_string(flavor), std::to_string(file));
}

void FlavorComparison::doubles(const char* field, double flavor, double file) const {
  if (flavor == file) return;
  auto format = [](double v) {
    std::ostringstream s;
    s.precision(17);
    s << v;
    return s.str();
  };
  mismatch(field, format(flavor), format(file));
}

void FlavorComparison::bools(const char* field, bool flavor, bool file) const {
  if (flavor != file) mismatch(field, flavor ? "true" : "false", file ? "true" : "false");
}

void FlavorComparison::strings(const char* field, const std::string& flavor,
                               const std::string& file) const {
  if (flavor != file) mismatch(field, flavor, file);
}

}  // namespace titan::models
