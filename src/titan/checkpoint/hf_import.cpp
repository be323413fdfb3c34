#include "titan/checkpoint/hf_import.h"

#include <ATen/core/grad_mode.h>

#include <filesystem>
#include <fstream>
#include <map>

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

HfWeights::HfWeights(const std::string& dir, const models::ModelSpec& spec,
                     const NamedTensors& expected)
    : dir_(dir), files_(SafetensorsDirectory::open(dir)) {
  models::LazyTensors lazy;
  try {
    lazy = spec.adapter.from_hf(
        files_.keys(), [&](const std::string& key) { return files_.tensor(key); }, expected);
  } catch (const Error& e) {
    fail(dir, ": ", e.what());
  }
  for (auto& [name, t] : lazy) tensors_.emplace(name, std::move(t));
  for (const auto& [name, want] : expected) {
    auto it = tensors_.find(name);
    TITAN_CHECK(it != tensors_.end(), dir, ": the checkpoint provides no tensor for ", name);
    const at::Tensor& preview = it->second.preview;
    TITAN_CHECK(preview.sizes() == want.sizes(), dir, ": tensor for ", name, " has shape ",
                preview.sizes(), ", the model expects ", want.sizes());
    TITAN_CHECK(preview.is_floating_point(), dir, ": tensor for ", name, " has dtype ",
                preview.scalar_type(), ", expected a floating-point type");
  }
}

at::Tensor HfWeights::read(const std::string& name) const {
  auto it = tensors_.find(name);
  TITAN_CHECK(it != tensors_.end(), dir_, ": the checkpoint provides no tensor for ", name);
  return it->second.read();
}

namespace {

// The model built here against the folder's config.json, before any tensor is compared: a
// named flavor that is another model than the folder's is one line naming the first
// differing dimension and the way out, not a list of every mis-shaped tensor.
void check_dimensions(const models::ModelTensors& model, const std::string& dir) {
  const std::filesystem::path path = std::filesystem::path(dir) / "config.json";
  if (!std::filesystem::exists(path)) return;
  const nlohmann::json file = read_hf_config(dir);
  const nlohmann::json built = model.hf_config("float32");
  for (const char* field : {"vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                            "num_key_value_heads", "head_dim", "intermediate_size", "num_experts",
                            "moe_intermediate_size", "tie_word_embeddings"}) {
    if (!file.contains(field) || !built.contains(field) || file[field] == built[field]) continue;
    fail(path.string(), " has ", field, " = ", file[field].dump(), ", but the model built here ",
         "(model.flavor) has ", built[field].dump(),
         ": its weights do not fit; give --model.flavor auto to take every dimension from ",
         path.string());
  }
}

}  // namespace

void load_hf_weights(models::ModelTensors& model, const models::ModelSpec& spec,
                     const std::string& dir, const TensorLayout& layout) {
  check_dimensions(model, dir);
  const NamedTensors params = model.named_parameters();
  std::vector<LocalPiece> pieces;
  std::map<std::string, std::vector<int64_t>> global;
  for (const auto& [name, p] : params) {
    pieces.push_back(layout.piece(name, p));
    global[name] = pieces.back().global_shape;
  }
  // What the adapter must produce: the whole model's parameters with their full shapes (meta
  // tensors cost nothing), a pipeline stage's included, though it reads only its own.
  NamedTensors expected;
  for (const auto& [name, t] : model.initialisation_order()) {
    auto it = global.find(name);
    expected.emplace_back(name, at::empty(it != global.end() ? it->second : t.sizes().vec(),
                                          t.options().device(at::kMeta)));
  }
  const HfWeights weights(dir, spec, expected);
  // One tensor at a time, its mapped pages dropped from memory every so often.
  constexpr int64_t kReleaseEvery = int64_t{64} << 20;
  int64_t read_since_release = 0;
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < params.size(); ++i) {
    at::Tensor target = params[i].second;
    const at::Tensor full = weights.read(params[i].first);
    if (pieces[i].whole) {
      target.copy_(full);
    } else {
      // This rank's box, read straight from the (memory-mapped) file's tensor.
      target.zero_();  // the padding
      real_part(target, pieces[i].box)
          .copy_(narrow_to(full, whole_box(pieces[i].global_shape), pieces[i].box));
    }
    read_since_release += full.numel() * static_cast<int64_t>(full.element_size());
    if (read_since_release >= kReleaseEvery) {
      weights.release_pages();
      read_since_release = 0;
    }
  }
  weights.release_pages();
}

}  // namespace titan::checkpoint
