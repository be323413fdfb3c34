#include "titan/checkpoint/hf_import.h"

#include <ATen/core/grad_mode.h>

#include <filesystem>
#include <fstream>

#include "titan/checkpoint/safetensors.h"
#include "titan/common/box_tensor.h"
#include "titan/common/error.h"

namespace titan::checkpoint {

nlohmann::json read_hf_config(const std::string& dir) {
  const std::filesystem::path path = std::filesystem::path(dir) / "config.json";
  std::ifstream in(path);
  TITAN_CHECK(in, path.string(),
              " does not exist or cannot be read (a Hugging Face model "
              "directory needs config.json)");
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    fail(path.string(), ": invalid JSON: ", e.what());
  }
}

void load_hf_weights(models::Model& model, const models::ModelSpec& spec, const std::string& dir,
                     const TensorLayout& layout) {
  const SafetensorsDirectory files = SafetensorsDirectory::open(dir);
  const NamedTensors params = model.named_parameters();
  // What the adapter must produce: the full shapes (meta tensors cost nothing).
  NamedTensors expected;
  std::vector<LocalPiece> pieces;
  for (const auto& [name, p] : params) {
    pieces.push_back(layout.piece(name, p));
    expected.emplace_back(name,
                          at::empty(pieces.back().global_shape, p.options().device(at::kMeta)));
  }
  NamedTensors loaded;
  try {
    loaded = spec.adapter.from_hf(
        files.keys(), [&](const std::string& key) { return files.tensor(key); }, expected);
  } catch (const Error& e) {
    fail(dir, ": ", e.what());
  }
  std::map<std::string, at::Tensor> by_name(loaded.begin(), loaded.end());
  for (size_t i = 0; i < params.size(); ++i) {
    const std::string& name = params[i].first;
    auto it = by_name.find(name);
    TITAN_CHECK(it != by_name.end(), dir, ": the checkpoint provides no tensor for ", name);
    TITAN_CHECK(it->second.sizes() == expected[i].second.sizes(), dir, ": tensor for ", name,
                " has shape ", it->second.sizes(), ", the model expects ",
                expected[i].second.sizes());
    TITAN_CHECK(it->second.is_floating_point(), dir, ": tensor for ", name, " has dtype ",
                it->second.scalar_type(), ", expected a floating-point type");
  }
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < params.size(); ++i) {
    at::Tensor target = params[i].second;
    const at::Tensor& full = by_name.at(params[i].first);
    if (pieces[i].whole) {
      target.copy_(full);
      continue;
    }
    // This rank's box, read straight from the (memory-mapped) file's tensor.
    target.zero_();  // the padding
    real_part(target, pieces[i].box)
        .copy_(narrow_to(full, whole_box(pieces[i].global_shape), pieces[i].box));
  }
}

}  // namespace titan::checkpoint
