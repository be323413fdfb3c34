#include "titan/checkpoint/hf_export.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>

#include "titan/checkpoint/safetensors.h"
#include "titan/common/error.h"
#include "titan/common/file_util.h"
#include "titan/config/field_values.h"

namespace titan::checkpoint {
namespace {

namespace fs = std::filesystem;

// Files a tokenizer directory may hold; copied when present so the export is self-contained.
constexpr const char* kTokenizerFiles[] = {
    "tokenizer.json",          "tokenizer_config.json", "vocab.json",          "merges.txt",
    "special_tokens_map.json", "added_tokens.json",     "chat_template.jinja",
};

// transformers v5 configs are strict dataclasses: these fields must be JSON floats even when
// their value is whole (0.0, 1000000.0).
const char* const kFloatFields[] = {
    "rms_norm_eps",      "initializer_range", "router_aux_loss_coef",
    "attention_dropout", "rope_theta",        "partial_rotary_factor",
};

void floats_as_floats(nlohmann::json& config) {
  if (!config.is_object()) return;
  for (const char* key : kFloatFields) {
    auto it = config.find(key);
    if (it != config.end() && (it->is_number_integer() || it->is_number_unsigned())) {
      *it = it->get<double>();
    }
  }
  auto rope = config.find("rope_parameters");
  if (rope != config.end()) floats_as_floats(*rope);
}

// Python's json.dumps(obj, indent=2, sort_keys=True) + "\n"; nlohmann objects are sorted maps,
// and ensure_ascii matches Python's default.
std::string python_style_json(const nlohmann::json& value) {
  return value.dump(2, ' ', /*ensure_ascii=*/true) + "\n";
}

std::string shard_name(size_t index, size_t count) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "model-%05zu-of-%05zu.safetensors", index + 1, count);
  return buf;
}

bool is_floating(at::ScalarType type) { return at::isFloatingType(type); }

}  // namespace

uint64_t parse_size(const std::string& text) {
  size_t begin = 0, end = text.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(text[begin]))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(text[end - 1]))) --end;
  size_t number_end = begin;
  while (number_end < end &&
         (std::isdigit(static_cast<unsigned char>(text[number_end])) || text[number_end] == '.')) {
    ++number_end;
  }
  std::string number = text.substr(begin, number_end - begin);
  std::string unit;
  for (size_t i = number_end; i < end; ++i) {
    if (!std::isspace(static_cast<unsigned char>(text[i]))) {
      unit += static_cast<char>(std::toupper(static_cast<unsigned char>(text[i])));
    }
  }
  auto bad = [&]() {
    fail("invalid size '", text, "': use a number of bytes or a number with a unit, e.g. 5GB, ",
         "500MB, 2GiB");
  };
  if (number.empty() || std::count(number.begin(), number.end(), '.') > 1) bad();
  double multiplier = 0;
  if (unit.empty() || unit == "B") {
    multiplier = 1;
  } else if (unit == "KB") {
    multiplier = 1e3;
  } else if (unit == "MB") {
    multiplier = 1e6;
  } else if (unit == "GB") {
    multiplier = 1e9;
  } else if (unit == "TB") {
    multiplier = 1e12;
  } else if (unit == "KIB") {
    multiplier = 1024.0;
  } else if (unit == "MIB") {
    multiplier = 1024.0 * 1024;
  } else if (unit == "GIB") {
    multiplier = 1024.0 * 1024 * 1024;
  } else if (unit == "TIB") {
    multiplier = 1024.0 * 1024 * 1024 * 1024;
  } else {
    bad();
  }
  if (multiplier == 1 && number.find('.') != std::string::npos) bad();  // fractional bytes
  double parsed = 0;
  if (!config::parse_double(number, parsed)) bad();
  const double value = parsed * multiplier;
  if (!(value >= 1) || value > 1.8e19) {
    fail("invalid size '", text, "': must be at least 1 byte");
  }
  return static_cast<uint64_t>(value);
}

at::ScalarType parse_export_dtype(const std::string& name) {
  if (name == "float32") return at::kFloat;
  if (name == "bfloat16") return at::kBFloat16;
  if (name == "float16") return at::kHalf;
  fail("unknown export dtype '", name, "' (expected float32, bfloat16 or float16)");
}

std::vector<std::vector<size_t>> plan_shards(const std::vector<uint64_t>& sizes,
                                             uint64_t max_shard_bytes) {
  std::vector<std::vector<size_t>> shards;
  std::vector<size_t> current;
  uint64_t current_bytes = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] > max_shard_bytes) {
      shards.push_back({i});
      continue;
    }
    if (current_bytes + sizes[i] > max_shard_bytes) {
      shards.push_back(std::move(current));
      current.clear();
      current_bytes = 0;
    }
    current.push_back(i);
    current_bytes += sizes[i];
  }
  if (!current.empty()) shards.push_back(std::move(current));
  // An empty state dict still gets one (empty) model.safetensors.
  if (shards.empty()) shards.emplace_back();
  return shards;
}

namespace {

// One tensor of the export, known before its data: its HF name, shape and dtype, and how to get
// it (an index into the caller's sources).
struct PlannedTensor {
  TensorSpec spec;
  size_t source = 0;
};

// Writes the planned tensors as model.safetensors, or as shards plus the index, into `dir`,
// asking `fetch(k)` for planned tensor k one at a time, in file order. With `dir` empty nothing
// is written but `fetch` is called in exactly the same order (the other ranks of a sharded
// export, which must take part in every gather). Returns the file names.
std::vector<std::string> write_planned_weights(const std::string& dir,
                                               const std::vector<PlannedTensor>& planned,
                                               uint64_t max_shard_bytes,
                                               const std::function<at::Tensor(size_t)>& fetch) {
  TITAN_CHECK(max_shard_bytes > 0, dir, ": the maximum shard size must be positive");
  std::vector<uint64_t> sizes;
  uint64_t total_size = 0, total_parameters = 0;
  for (const PlannedTensor& p : planned) {
    uint64_t numel = 1;
    for (int64_t d : p.spec.shape) numel *= static_cast<uint64_t>(d);
    sizes.push_back(numel * at::elementSize(p.spec.dtype));
    total_size += sizes.back();
    total_parameters += numel;
  }
  const auto shards = plan_shards(sizes, max_shard_bytes);
  const bool sharded = shards.size() > 1;
  std::vector<std::string> written;
  nlohmann::json weight_map = nlohmann::json::object();
  for (size_t s = 0; s < shards.size(); ++s) {
    const std::string file = sharded ? shard_name(s, shards.size()) : "model.safetensors";
    std::vector<TensorSpec> specs;
    for (size_t k : shards[s]) {
      specs.push_back(planned[k].spec);
      weight_map[planned[k].spec.name] = file;
    }
    auto tensor_of = [&](size_t i) { return fetch(shards[s][i]); };
    if (dir.empty()) {
      for (size_t i : safetensors_write_order(specs)) tensor_of(i);
    } else {
      write_safetensors_streamed((fs::path(dir) / file).string(), specs, tensor_of,
                                 {{"format", "pt"}});
    }
    written.push_back(file);
  }
  if (sharded && !dir.empty()) {
    nlohmann::json index = {
        {"metadata", {{"total_parameters", total_parameters}, {"total_size", total_size}}},
        {"weight_map", weight_map},
    };
    write_file_atomic((fs::path(dir) / "model.safetensors.index.json").string(),
                      python_style_json(index));
    written.push_back("model.safetensors.index.json");
  }
  return written;
}

at::ScalarType exported_dtype(at::ScalarType type, at::ScalarType export_dtype) {
  return is_floating(type) ? export_dtype : type;
}

}  // namespace

std::vector<std::string> write_hf_weights(const std::string& dir, const NamedTensors& hf_tensors,
                                          at::ScalarType export_dtype, uint64_t max_shard_bytes) {
  std::vector<PlannedTensor> planned;
  for (size_t i = 0; i < hf_tensors.size(); ++i) {
    const at::Tensor& t = hf_tensors[i].second;
    planned.push_back(
        {{hf_tensors[i].first, exported_dtype(t.scalar_type(), export_dtype), t.sizes().vec()}, i});
  }
  // Cast one tensor at a time (on the tensor's own device, which is faster on a GPU), so the
  // export never holds a second copy of the model.
  return write_planned_weights(dir, planned, max_shard_bytes, [&](size_t k) {
    return hf_tensors[planned[k].source].second.detach().to(planned[k].spec.dtype);
  });
}

std::string hf_config_text(nlohmann::json config) {
  floats_as_floats(config);
  return python_style_json(config);
}

std::string generation_config_text(const nlohmann::json& config) {
  nlohmann::json generation = nlohmann::json::object();
  for (const char* key : {"bos_token_id", "eos_token_id", "pad_token_id"}) {
    if (config.contains(key) && !config[key].is_null()) generation[key] = config[key];
  }
  generation["transformers_version"] =
      config.contains("transformers_version") && config["transformers_version"].is_string()
          ? config["transformers_version"].get<std::string>()
          : std::string("5.17.0");
  return python_style_json(generation);
}

NativeTensors model_parameters(models::ModelTensors& model, const TensorLayout& layout) {
  NativeTensors out;
  const NamedTensors params = model.named_parameters();
  for (const auto& [name, local] : params)
    out.metas.emplace_back(
        name, at::empty(layout.piece(name, local).global_shape, local.options().device(at::kMeta)));
  out.full = [params, &layout](size_t i) { return layout.full(params[i].first, params[i].second); };
  return out;
}

void export_hf_directory(models::ModelTensors& model, const models::ModelSpec& spec,
                         const std::string& out_dir, const std::string& export_dtype,
                         uint64_t max_shard_bytes, const std::string& tokenizer_src_dir,
                         const TensorLayout& layout, const NativeTensors* tensors) {
  const at::ScalarType dtype = parse_export_dtype(export_dtype);
  TITAN_CHECK(!out_dir.empty(), "HF export: the output directory is empty");
  TITAN_CHECK(spec.adapter.to_hf, "HF export: model spec '", spec.name,
              "' has no state-dict adapter");
  std::string target = out_dir;
  while (target.size() > 1 && target.back() == '/') target.pop_back();

  nlohmann::json config = model.hf_config(export_dtype);
  config["torch_dtype"] = export_dtype;  // the weights below are in this dtype
  config["dtype"] = export_dtype;

  // The plan, from the full shapes alone (the adapter maps meta tensors), so that a sharded
  // model is gathered one native tensor at a time, while its pieces are written.
  const NativeTensors own = tensors ? NativeTensors{} : model_parameters(model, layout);
  const NativeTensors& native = tensors ? *tensors : own;
  std::vector<PlannedTensor> planned;
  for (size_t j = 0; j < native.metas.size(); ++j) {
    const auto& [name, meta] = native.metas[j];
    for (const auto& [hf_name, t] : spec.adapter.to_hf({{name, meta}})) {
      planned.push_back({{hf_name, exported_dtype(t.scalar_type(), dtype), t.sizes().vec()}, j});
    }
  }
  // The last two gathered native tensors and their HF pieces: a layer's experts interleave
  // pieces of two fused tensors in file order.
  std::vector<std::pair<size_t, std::map<std::string, at::Tensor>>> cache;
  auto fetch = [&](size_t k) -> at::Tensor {
    const size_t j = planned[k].source;
    auto hit =
        std::find_if(cache.begin(), cache.end(), [&](const auto& c) { return c.first == j; });
    if (hit == cache.end()) {
      const at::Tensor full = native.full(j);
      std::map<std::string, at::Tensor> pieces;
      for (auto& [hf_name, t] : spec.adapter.to_hf({{native.metas[j].first, full}}))
        pieces[hf_name] = t;
      if (cache.size() == 2) cache.erase(cache.begin());
      cache.emplace_back(j, std::move(pieces));
      hit = std::prev(cache.end());
    }
    return hit->second.at(planned[k].spec.name).detach().to(planned[k].spec.dtype);
  };
  if (!layout.coordinator()) {
    write_planned_weights("", planned, max_shard_bytes, fetch);  // take part in the gathers
    return;
  }

  write_directory_atomically(target, [&](const std::string& staged) {
    write_planned_weights(staged, planned, max_shard_bytes, fetch);
    write_file_atomic((fs::path(staged) / "config.json").string(), hf_config_text(config));

    bool copied_generation_config = false;
    if (!tokenizer_src_dir.empty()) {
      std::vector<std::string> names(std::begin(kTokenizerFiles), std::end(kTokenizerFiles));
      names.push_back("generation_config.json");  // the source's sampling defaults win
      for (const std::string& name : names) {
        const fs::path from = fs::path(tokenizer_src_dir) / name;
        if (!fs::is_regular_file(from)) continue;
        write_file_atomic((fs::path(staged) / name).string(), read_text_file(from.string()));
        copied_generation_config |= name == "generation_config.json";
      }
    }
    if (!copied_generation_config) {
      write_file_atomic((fs::path(staged) / "generation_config.json").string(),
                        generation_config_text(config));
    }
  });
}

}  // namespace titan::checkpoint
