#include "titan/config/derived_defaults.h"

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "titan/common/error.h"
#include "titan/common/strings.h"
#include "titan/config/torchtitan_keys.h"

namespace fs = std::filesystem;

namespace titan::config {
namespace {

bool given(const std::set<std::string>& keys, const char* key) { return keys.count(key) > 0; }

bool path_exists(const fs::path& p) {
  std::error_code ec;
  return fs::exists(p, ec);
}

// A Hugging Face model folder, as opposed to a training checkpoint (step-N with a manifest).
bool is_hf_folder(const std::string& path) {
  if (path.empty()) return false;
  return path_exists(fs::path(path) / "config.json") &&
         !path_exists(fs::path(path) / "manifest.json");
}

// The built-in default of a path field, taken relative to the installation: a plain relative
// path (not a list of datasets, whose entries are the user's own).
void anchor(std::string& path, const std::string& install_root) {
  if (install_root.empty() || path.empty() || path.find(',') != std::string::npos) return;
  const fs::path p(path);
  if (p.is_absolute()) return;
  path = (fs::path(install_root) / p).lexically_normal().string();
}

std::vector<std::string> dataset_names() {
  std::vector<std::string> names;
  for (const BuiltinDataset& d : builtin_datasets()) names.emplace_back(d.name);
  return names;
}

// training.packing and training.document_masking say the same thing twice (document masking
// is the block-causal attention of packings hf_flattening and torchtitan): the one given
// decides, document_masking true alone meaning hf_flattening, the packing of titan's SFT.
void reconcile_packing(TrainingConfig& t, const std::set<std::string>& given_keys) {
  const bool block_causal = t.packing != "megatron";
  if (given(given_keys, "training.packing")) {
    if (given(given_keys, "training.document_masking") && t.document_masking != block_causal) {
      fail("training.document_masking = ", t.document_masking ? "true" : "false",
           " contradicts training.packing = \"", t.packing, "\", which is ",
           block_causal ? "block-causal" : "causal across the row",
           "; give one of them (packing megatron is causal, hf_flattening and torchtitan are "
           "block-causal)");
    }
    t.document_masking = block_causal;
  } else if (t.document_masking && !block_causal) {
    t.packing = "hf_flattening";
  } else if (!t.document_masking && block_causal) {
    t.packing = "megatron";
  }
}

}  // namespace

const std::vector<BuiltinDataset>& builtin_datasets() {
  // Both are written by scripts/setup.
  static const std::vector<BuiltinDataset> datasets = {
      {"python_stdlib", "assets/corpus/python_stdlib.jsonl"},
      {"chat", "assets/sft/chat.jsonl"},
  };
  return datasets;
}

void apply_derived_defaults(TrainerConfig& c, const std::set<std::string>& given_keys,
                            const std::string& install_root, std::vector<std::string>* notes) {
  // 1. The dataset name: read, or refused.
  const BuiltinDataset* dataset = nullptr;
  for (const BuiltinDataset& d : builtin_datasets())
    if (c.training.dataset == d.name) dataset = &d;
  if (dataset == nullptr && is_torchtitan_dataset(c.training.dataset)) {
    // torchtitan's names, which it downloads from the hub: fine with a file of the user's.
    if (!given(given_keys, "training.dataset_path")) {
      fail("training.dataset = \"", c.training.dataset,
           "\" is torchtitan's name for allenai/c4 on the Hugging Face hub, which titan does not "
           "download: give training.dataset_path (local data: jsonl, jsonl.gz/zst, Parquet, Arrow, "
           "text files, a folder or a glob of them)");
    }
    if (notes != nullptr) {
      notes->push_back("training.dataset = \"" + c.training.dataset +
                       "\": torchtitan's name; titan reads training.dataset_path " +
                       c.training.dataset_path);
    }
  } else if (dataset == nullptr && !c.training.dataset.empty()) {
    fail("training.dataset = \"", c.training.dataset,
         "\": not a built-in dataset; accepted values are ", join(dataset_names()),
         ", or \"\" (for a dataset of your own, set training.dataset_path)");
  }
  if (dataset != nullptr && given(given_keys, "training.dataset") &&
      !given(given_keys, "training.dataset_path"))
    c.training.dataset_path = dataset->path;

  // 2. Built-in default paths, relative to the installation.
  struct PathField {
    const char* key;
    std::string& value;
  };
  for (const PathField& f :
       {PathField{"model.hf_assets_path", c.model.hf_assets_path},
        PathField{"training.dataset_path", c.training.dataset_path},
        PathField{"validator.dataset_path", c.validator.dataset_path},
        PathField{"checkpoint.initial_load_path", c.checkpoint.initial_load_path}}) {
    if (!given(given_keys, f.key)) anchor(f.value, install_root);
  }

  // 3. The folder being fine-tuned holds the tokenizer and config.json.
  if (!given(given_keys, "model.hf_assets_path") && is_hf_folder(c.checkpoint.initial_load_path))
    c.model.hf_assets_path = c.checkpoint.initial_load_path;

  // 4. A config function's model.hf_model names the hub model its default weights are: a base
  //    of the user's own (checkpoint.initial_load_path, model.hf_assets_path) is another
  //    model, which the adapter export then names by its folder (a native model reads
  //    hf_model for nothing else).
  if (c.model.name != "transformers" && !given(given_keys, "model.hf_model") &&
      (given(given_keys, "checkpoint.initial_load_path") ||
       given(given_keys, "model.hf_assets_path")))
    c.model.hf_model = "";

  // 5. The packing and its block-causal attention; torchtitan's packing separates documents
  //    with the tokenizer's own eos token, as torchtitan does.
  reconcile_packing(c.training, given_keys);
  if (c.training.packing == "torchtitan" && !given(given_keys, "training.eos_token")) {
    const std::string eos = tokenizer_config_eos(c.model.hf_assets_path);
    if (!eos.empty()) {
      c.training.eos_token = eos;
      if (notes != nullptr) {
        notes->push_back("training.eos_token = \"" + eos + "\": the eos_token of " +
                         (fs::path(c.model.hf_assets_path) / "tokenizer_config.json").string() +
                         " (training.packing torchtitan takes the tokenizer's, as torchtitan "
                         "does)");
      }
    }
  }
}

std::string tokenizer_config_token(const std::string& assets, const std::string& key) {
  const fs::path path = fs::path(assets) / "tokenizer_config.json";
  std::ifstream in(path);
  if (!in) return "";
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains(key)) return "";
  const nlohmann::json& token = j[key];
  if (token.is_string()) return token.get<std::string>();
  if (token.is_object() && token.contains("content") && token["content"].is_string())
    return token["content"].get<std::string>();
  return "";
}

std::string tokenizer_config_eos(const std::string& assets) {
  return tokenizer_config_token(assets, "eos_token");
}

std::string describe_model_sources(const TrainerConfig& c) {
  const ModelConfig& m = c.model;
  const bool from_initial_load =
      !c.checkpoint.initial_load_path.empty() && m.hf_assets_path == c.checkpoint.initial_load_path;
  const std::string config_json = (fs::path(m.hf_assets_path) / "config.json").string();
  std::string line =
      "tokenizer from " + m.hf_assets_path +
      (from_initial_load ? " (checkpoint.initial_load_path)" : " (model.hf_assets_path)") +
      ", model dimensions ";
  if (m.flavor == "auto") return line + "from " + config_json + " (model.flavor auto)";
  if (m.name == "transformers") {
    return line + "from model.hf_model \"" + m.hf_model + "\"" +
           (m.hf_config_overrides.empty() ? "" : " with model.hf_config_overrides");
  }
  line += "of flavor " + m.flavor;
  if (path_exists(config_json)) line += ", checked against " + config_json;
  return line;
}

void check_input_paths(const TrainerConfig& c, const std::set<std::string>& given_keys) {
  std::error_code ec;
  const std::string& initial = c.checkpoint.initial_load_path;
  if (!initial.empty()) {
    TITAN_CHECK(path_exists(initial), "checkpoint.initial_load_path = \"", initial,
                "\": no such directory (expected a Hugging Face folder with config.json and "
                "*.safetensors, or a training checkpoint step-N)");
    TITAN_CHECK(fs::is_directory(initial, ec), "checkpoint.initial_load_path = \"", initial,
                "\": not a directory (expected a Hugging Face folder with config.json and "
                "*.safetensors, or a training checkpoint step-N)");
    // The folder is named for the model it holds; what it lacks is said of it, not of the
    // config function's default model.hf_assets_path that would otherwise stand in.
    const bool assets_given = given(given_keys, "model.hf_assets_path");
    const bool checkpoint_folder = path_exists(fs::path(initial) / "manifest.json");
    TITAN_CHECK(assets_given || checkpoint_folder || path_exists(fs::path(initial) / "config.json"),
                "checkpoint.initial_load_path = \"", initial,
                "\": no config.json there (a Hugging Face folder, as save_pretrained or the hub "
                "leaves it, holds config.json, its *.safetensors and the tokenizer files; a "
                "training checkpoint step-N holds manifest.json); or give --model.hf_assets_path "
                "DIR, a folder with the model's config.json and tokenizer");
    TITAN_CHECK(assets_given || !checkpoint_folder || c.model.flavor != "auto" ||
                    path_exists(fs::path(c.model.hf_assets_path) / "config.json"),
                "checkpoint.initial_load_path = \"", initial,
                "\" is a training checkpoint, which holds no config.json or tokenizer files, and "
                "model.flavor auto needs a config.json: give --model.hf_assets_path DIR, the "
                "Hugging Face folder of the model it was trained from");
  }
  // A single dataset path (not a list, not a glob) that is not there: named by its key.
  const auto check_dataset = [&](const char* key, const std::string& path) {
    if (path.empty() || path.find_first_of(",*?[:") != std::string::npos) return;
    TITAN_CHECK(path_exists(path), key, " = \"", path, "\": no such file or folder",
                fs::path(path).is_relative()
                    ? " (relative to the current directory, " + fs::current_path(ec).string() + ")"
                    : std::string());
  };
  check_dataset("training.dataset_path", c.training.dataset_path);
  if (c.validator.enable) check_dataset("validator.dataset_path", c.validator.dataset_path);
  const std::string& assets = c.model.hf_assets_path;
  const bool from_initial_load = !initial.empty() && assets == initial;
  // Where a fine-tune's weights come from when no initial_load_path is given.
  const bool loads_assets = initial.empty() && c.checkpoint.initial_load_in_hf;
  TITAN_CHECK(path_exists(assets), "model.hf_assets_path = \"", assets,
              "\": no such directory (the folder with the tokenizer files and config.json",
              loads_assets ? ", and the weights: checkpoint.initial_load_path is empty; give "
                             "--checkpoint.initial_load_path DIR, a Hugging Face folder"
                           : "",
              ")");
  if (!fs::is_regular_file(assets, ec)) {
    TITAN_CHECK(path_exists(fs::path(assets) / "tokenizer.json"), "model.hf_assets_path = \"",
                assets, "\": no tokenizer.json there",
                from_initial_load
                    ? " (it is checkpoint.initial_load_path: copy the tokenizer files "
                      "tokenizer.json and tokenizer_config.json there, or give "
                      "--model.hf_assets_path DIR, a folder with them and the model's config.json)"
                    : " (the folder must hold the tokenizer files tokenizer.json and "
                      "tokenizer_config.json)");
  }
}

}  // namespace titan::config
