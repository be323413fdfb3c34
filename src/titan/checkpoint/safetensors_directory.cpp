// SafetensorsDirectory: a Hugging Face weights folder, single-file or sharded, resolved the way
// transformers does (model.safetensors first, else model.safetensors.index.json).
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <set>

#include "titan/checkpoint/safetensors.h"
#include "titan/common/error.h"
#include "titan/common/file_util.h"

namespace titan::checkpoint {
namespace {

namespace fs = std::filesystem;

constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";

// Shard names from the index's weight_map, sorted and unique (transformers:
// sorted(set(weight_map.values()))), with a check that every named file exists.
std::vector<std::string> shard_names(const std::string& index_path, const std::string& dir,
                                     const nlohmann::json& weight_map) {
  std::set<std::string> names;
  for (const auto& [key, value] : weight_map.items()) {
    if (!value.is_string()) fail(index_path, ": weight_map entry '", key, "' must be a file name");
    names.insert(value.get<std::string>());
  }
  for (const std::string& name : names) {
    const fs::path relative(name);
    bool escapes = name.empty() || relative.is_absolute();
    for (const auto& part : relative) escapes = escapes || part == "..";
    if (escapes) {
      fail(index_path, ": weight_map names '", name, "', which is not a file inside ", dir);
    }
    fs::path shard = fs::path(dir) / name;
    if (!fs::is_regular_file(shard)) {
      fail(index_path, ": weight_map names ", name, ", but ", shard.string(), " does not exist");
    }
  }
  return {names.begin(), names.end()};
}

}  // namespace

SafetensorsDirectory SafetensorsDirectory::open(const std::string& dir) {
  SafetensorsDirectory result;
  result.dir_ = dir;
  if (!fs::is_directory(dir)) fail(dir, ": not a directory");
  const fs::path single = fs::path(dir) / kSingleFile;
  const fs::path index_path = fs::path(dir) / kIndexFile;

  nlohmann::json weight_map;
  if (fs::is_regular_file(single)) {
    result.files_.push_back(SafetensorsFile::open(single.string()));
  } else if (fs::is_regular_file(index_path)) {
    nlohmann::json index;
    try {
      index = nlohmann::json::parse(read_text_file(index_path.string()));
    } catch (const nlohmann::json::exception& e) {
      fail(index_path.string(), ": invalid JSON: ", e.what());
    }
    if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
      fail(index_path.string(), ": missing the \"weight_map\" object");
    }
    weight_map = index["weight_map"];
    for (const std::string& name : shard_names(index_path.string(), dir, weight_map)) {
      result.files_.push_back(SafetensorsFile::open((fs::path(dir) / name).string()));
    }
  } else {
    fail(dir, ": no ", kSingleFile, " or ", kIndexFile, " in this directory");
  }

  for (size_t f = 0; f < result.files_.size(); ++f) {
    for (const TensorInfo& t : result.files_[f].tensors()) {
      auto [it, inserted] = result.where_.emplace(t.name, f);
      if (!inserted) {
        fail(dir, ": tensor '", t.name, "' is in both ", result.files_[it->second].path(), " and ",
             result.files_[f].path(), " (every key must be in exactly one shard)");
      }
    }
  }
  // The index must agree with the shards: each mapped key lives in the file it names.
  for (const auto& [key, value] : weight_map.items()) {
    auto it = result.where_.find(key);
    const std::string named = (fs::path(dir) / value.get<std::string>()).string();
    if (it == result.where_.end()) {
      fail(index_path.string(), ": weight_map puts '", key, "' in ", value.get<std::string>(),
           ", but that file has no such tensor");
    }
    if (result.files_[it->second].path() != named) {
      fail(index_path.string(), ": weight_map puts '", key, "' in ", value.get<std::string>(),
           ", but it is in ", result.files_[it->second].path());
    }
  }
  return result;
}

std::vector<std::string> SafetensorsDirectory::keys() const {
  std::vector<std::string> keys;
  keys.reserve(where_.size());
  for (const auto& [key, file] : where_) keys.push_back(key);
  return keys;  // std::map iterates in sorted order
}

bool SafetensorsDirectory::contains(const std::string& name) const {
  return where_.count(name) > 0;
}

const TensorInfo& SafetensorsDirectory::info(const std::string& name) const {
  auto it = where_.find(name);
  if (it == where_.end()) fail(dir_, ": no tensor named '", name, "' in this checkpoint");
  return files_[it->second].info(name);
}

at::Tensor SafetensorsDirectory::tensor(const std::string& name) const {
  auto it = where_.find(name);
  if (it == where_.end()) fail(dir_, ": no tensor named '", name, "' in this checkpoint");
  return files_[it->second].tensor(name);
}

void SafetensorsDirectory::release_pages() const {
  for (const SafetensorsFile& file : files_) file.release_pages();
}

}  // namespace titan::checkpoint
