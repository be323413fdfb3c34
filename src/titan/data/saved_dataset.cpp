#include "titan/data/saved_dataset.h"

#include <filesystem>

#include <nlohmann/json.hpp>

#include "titan/common/error.h"
#include "titan/common/file_util.h"

namespace titan::data {

std::optional<std::vector<std::string>> saved_dataset_files(const std::string& folder) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(fs::path(folder) / "dataset_dict.json", ec))
    fail("dataset folder ", folder,
         " is a DatasetDict saved by datasets' save_to_disk; set training.dataset_path to one "
         "split's folder (e.g. ",
         (fs::path(folder) / "train").string(), ")");
  const fs::path state = fs::path(folder) / "state.json";
  if (!fs::is_regular_file(state, ec)) return std::nullopt;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_text_file(state.string()));
  } catch (const nlohmann::json::exception& e) {
    fail("dataset file ", state.string(), ": invalid JSON: ", e.what());
  }
  const auto bad = [&] {
    fail("dataset file ", state.string(),
         ": expected \"_data_files\": a list of {\"filename\": NAME} (as datasets' "
         "save_to_disk writes it)");
  };
  if (!j.is_object() || !j.contains("_data_files") || !j["_data_files"].is_array()) bad();
  // save_to_disk writes no data file at all for a Dataset of 0 rows.
  TITAN_CHECK(!j["_data_files"].empty(), "dataset folder ", folder,
              " is empty: its state.json lists no data file (a saved Dataset of 0 rows)");
  std::vector<std::string> files;
  for (const auto& entry : j["_data_files"]) {
    if (!entry.is_object() || !entry.contains("filename") || !entry["filename"].is_string()) bad();
    const fs::path name = entry["filename"].get<std::string>();
    // Only names inside the folder: state.json is data, not a licence to read elsewhere.
    if (name.empty() || name != name.filename() || name == "." || name == "..")
      fail("dataset file ", state.string(), ": data file name \"", name.string(),
           "\" is not a file name inside ", folder);
    files.push_back((fs::path(folder) / name).string());
  }
  return files;
}

}  // namespace titan::data
