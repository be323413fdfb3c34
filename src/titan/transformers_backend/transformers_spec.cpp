// The "transformers" ModelSpec: Hugging Face Transformers' own model of any decoder-only causal
// LM, trained by titan (docs/transformers_backend.md). This file is the entry point of the
// backend's shared library, which titan loads only when this backend is selected.
#include <pybind11/embed.h>
#include <torch/csrc/utils/pybind.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>

#include "titan/common/error.h"
#include "titan/common/strings.h"
#include "titan/models/common/activation_checkpoint.h"
#include "titan/models/common/decoder_plan.h"
#include "titan/models/model_spec.h"
#include "titan/transformers_backend/context_parallel.h"
#include "titan/transformers_backend/helper_py.h"
#include "titan/transformers_backend/modules_py.h"
#include "titan/transformers_backend/pretrained_shares.h"
#include "titan/transformers_backend/python_runtime.h"
#include "titan/transformers_backend/transformers_model.h"
#include "titan/transformers_backend/transformers_parallel.h"

namespace py = pybind11;
namespace fs = std::filesystem;

namespace titan::transformers_backend {
namespace {

// The helper module (helper.py, compiled in), executed once.
py::object helper_module() {
  static PyRef module;
  if (!module) {
    // The helper's own modules first (modules_py.h), under the names helper.py imports.
    py::dict installed = py::module_::import("sys").attr("modules");
    for (const auto& [name, source] : kPythonModules) {
      py::module_ part =
          py::module_::create_extension_module(name, nullptr, new py::module_::module_def);
      installed[name] = part;
      py::exec(source, part.attr("__dict__"));
    }
    py::module_ m = py::module_::create_extension_module("titan_transformers_helper", nullptr,
                                                         new py::module_::module_def);
    py::exec(kHelperSource, m.attr("__dict__"));
    module = hold(m);
  }
  return *module;
}

// Where the model comes from: a Hugging Face directory, or a fresh config of a model type.
struct Source {
  std::string dir;         // with config.json (and weights, for a pretrained start)
  std::string model_type;  // when there is no directory
  bool as_is = false;      // model.flavor auto: the directory's config.json, no overrides
};

bool has_config(const fs::path& dir) { return fs::exists(dir / "config.json"); }

Source resolve_source(const config::ModelConfig& m) {
  Source s;
  const fs::path assets(m.hf_assets_path);
  if (m.flavor == "auto" && !m.hf_assets_path.empty() && has_config(assets)) {
    s.dir = assets.string();
    s.as_is = true;
    return s;
  }
  if (!m.hf_model.empty()) {
    const fs::path id(m.hf_model);
    std::vector<std::string> tried{m.hf_model};
    for (const fs::path& candidate : {id, assets, assets / id.filename()}) {
      if (!candidate.empty() && has_config(candidate)) {
        s.dir = candidate.string();
        return s;
      }
      tried.push_back(candidate.string());
    }
    py::gil_scoped_acquire gil;
    py::object mapping = py::module_::import("transformers").attr("CONFIG_MAPPING");
    if (mapping.attr("__contains__")(m.hf_model).cast<bool>()) {
      s.model_type = m.hf_model;
      return s;
    }
    fail("model.hf_model '", m.hf_model, "': no Hugging Face directory (config.json) at ",
         join({m.hf_model, (assets).string(), (assets / id.filename()).string()}),
         ", and not a model type transformers knows (e.g. qwen3, qwen3_moe, llama)");
  }
  fail("model.name transformers needs model.hf_model (a Hugging Face directory, a model id under ",
       "model.hf_assets_path, or a model type such as qwen3), or model.flavor auto with a ",
       "config.json in model.hf_assets_path");
}

// model.hf_config_overrides ["num_hidden_layers=2", ...] as a JSON object; values are JSON,
// or strings when they do not parse.
std::string overrides_json(const std::vector<std::string>& entries) {
  nlohmann::json out = nlohmann::json::object();
  for (const std::string& entry : entries) {
    const size_t eq = entry.find('=');
    TITAN_CHECK(eq != std::string::npos && eq > 0, "model.hf_config_overrides entry '", entry,
                "': expected FIELD=VALUE, e.g. num_hidden_layers=2");
    const std::string value = entry.substr(eq + 1);
    try {
      out[entry.substr(0, eq)] = nlohmann::json::parse(value);
    } catch (const nlohmann::json::exception&) {
      out[entry.substr(0, eq)] = value;
    }
  }
  return out.dump();
}

const char* dtype_name(at::ScalarType t) {
  switch (t) {
    case at::kBFloat16:
      return "bfloat16";
    case at::kHalf:
      return "float16";
    default:
      return "float32";
  }
}

// model.moe_load_balancing as Transformers' MoE configs know it: the auxiliary loss of
// load_balancing_loss_func (output_router_logits, router_aux_loss_coef) or none; Transformers'
// Qwen3-MoE has no expert bias.
std::string balancing_json(const config::ModelConfig& m) {
  TITAN_CHECK(m.moe_load_balancing != "expert_bias",
              "model.moe_load_balancing = \"expert_bias\": the Transformers backend balances "
              "experts with the auxiliary loss (aux_loss) or not at all (none); expert bias is the "
              "native model's (model.name = qwen3)");
  nlohmann::json j = {{"output_router_logits", m.moe_load_balancing == "aux_loss"}};
  if (m.moe_load_balancing == "aux_loss") j["router_aux_loss_coef"] = m.router_aux_loss_coef;
  return j.dump();
}

std::unique_ptr<models::Model> build_model(const std::string& dir, const std::string& model_type,
                                           const std::string& overrides, const std::string& attn,
                                           const std::string& experts,
                                           const std::string& pretrained,
                                           const models::BuildOptions& opts,
                                           const std::string& balancing = "{}",
                                           bool shares_only = false) {
  ensure_python();
  py::gil_scoped_acquire gil;
  try {
    py::object helper = helper_module();
    py::object config =
        helper.attr("make_config")(dir, model_type, overrides, attn, experts, balancing);
    py::object model = helper.attr("build")(config, pretrained, opts.seed, opts.device.str(),
                                            dtype_name(opts.param_dtype), shares_only);
    if (shares_only && !py::hasattr(model, "_titan_weights_dir"))
      std::cout << "[titan] " << pretrained
                << " holds tensors that Transformers converts while loading (or no "
                   "model.safetensors): each rank loads the whole model before keeping its share"
                << std::endl;
    return std::make_unique<TransformersModel>(model, helper, opts.compute_dtype);
  } catch (const py::error_already_set& e) {
    fail("Transformers backend: ", describe(e));
  }
}

// Whether the pretrained model is built as shapes, each rank reading its share of the
// checkpoint in parallelize (pretrained_shares.h): under tensor, pipeline or expert parallelism,
// when the caller materialises the parameters and, as the trainer does when it loads an initial
// checkpoint (checkpoint.initial_load_path, else model.hf_assets_path), leaves them
// uninitialised. LoRA's converter reads a model built with its weights.
bool reads_shares(const config::TrainerConfig& cfg, const models::BuildOptions& opts,
                  const std::string& pretrained) {
  const auto& p = cfg.parallelism;
  const bool split = p.tensor_parallel_degree > 1 || p.pipeline_parallel_degree > 1 ||
                     p.expert_parallel_degree > 1;
  const bool uninitialised =
      !cfg.checkpoint.initial_load_path.empty() || !cfg.model.hf_assets_path.empty();
  return split && opts.meta_parameters && !pretrained.empty() && uninitialised &&
         cfg.model.converters.empty();
}

std::unique_ptr<models::Model> build(const config::TrainerConfig& cfg,
                                     const models::BuildOptions& opts) {
  ensure_python();
  const Source source = resolve_source(cfg.model);
  std::string pretrained;
  if (cfg.checkpoint.initial_load_in_hf) {
    pretrained =
        cfg.checkpoint.initial_load_path.empty() ? source.dir : cfg.checkpoint.initial_load_path;
    TITAN_CHECK(!pretrained.empty(), "checkpoint.initial_load_in_hf needs a Hugging Face ",
                "directory with weights: set checkpoint.initial_load_path or model.hf_model");
  }
  if (source.as_is && !cfg.model.hf_config_overrides.empty()) {
    std::cout << "[titan] model.flavor auto: the model of " << source.dir
              << "/config.json as it is (model.hf_config_overrides not applied)" << std::endl;
  }
  const std::vector<std::string> overrides =
      source.as_is ? std::vector<std::string>{} : cfg.model.hf_config_overrides;
  return build_model(source.dir, source.model_type, overrides_json(overrides),
                     cfg.model.attn_implementation, cfg.model.experts_implementation, pretrained,
                     opts, balancing_json(cfg.model), reads_shares(cfg, opts, pretrained));
}

// titan forward / eval / generate / convert: a Hugging Face directory (its weights come with
// it), or the config recorded in a training checkpoint (the weights are loaded after).
std::unique_ptr<models::Model> build_from_hf_config(const nlohmann::json& hf_config,
                                                    const std::string& source,
                                                    const models::BuildOptions& opts) {
  const fs::path path(source);
  if (path.filename() == "config.json") {
    const std::string dir = path.parent_path().string();
    return build_model(dir, "", "{}", "", "", opts.init_weights ? "" : dir, opts);
  }
  ensure_python();
  // A training checkpoint: the config it recorded, without weights.
  const fs::path tmp =
      fs::temp_directory_path() / ("titan-hf-config-" + std::to_string(::getpid()));
  fs::create_directories(tmp);
  { std::ofstream(tmp / "config.json") << hf_config.dump(); }
  auto model = build_model(tmp.string(), "", "{}", "", "", "", opts);
  fs::remove_all(tmp);
  return model;
}

void parallelize(models::Model& model, const config::TrainerConfig& cfg,
                 models::ParallelContext& parallel) {
  auto& hf = dynamic_cast<TransformersModel&>(model);
  TITAN_CHECK(!hf.staged() || (parallel.degree("tp") == 1 && parallel.degree("ep") == 1),
              "parallelism.pipeline_parallel_degree > 1 with tensor or expert parallelism: the "
              "Transformers backend does not split a pipeline stage's layers yet; use a native "
              "model (model.name = qwen3) for PP x TP and PP x EP");
  // torchtitan's order: tensor parallelism, expert parallelism, context parallelism's
  // attention, activation checkpointing, FSDP. A model built as shapes reads its checkpoint
  // around the first two, each rank its own share.
  PretrainedShares shares(hf, parallel);
  apply_tensor_parallel(hf, cfg, parallel);
  const std::vector<std::string> stacks = apply_expert_parallel(hf, parallel);
  shares.own(stacks);
  if (parallel.degree("cp") > 1) apply_context_parallel(hf, parallel, cfg.training.seq_len);
  models::apply_activation_checkpointing(model.blocks(), cfg.activation_checkpoint);
  if (!parallel.data_parallel()) return;
  // The units in forward order: the untied input embedding, the decoder layers, and the root
  // (the norm and the head the loss reads after the forward, with a tied embedding): the head
  // unit of the decoder's FSDP units. A pipeline stage holds some of them.
  models::DecoderUnits units;
  units.blocks = model.blocks();
  if (models::Module* head = hf.head_unit()) units.head = {head};
  units.embedding = hf.embedding_unit();
  const std::set<std::string> experts(stacks.begin(), stacks.end());
  models::shard_decoder_units(
      parallel, units, cfg.parallelism.fsdp_reshard_after_forward,
      [experts](const std::string& name) { return experts.count(name) > 0; });
}

// torchtitan's convention, from the parameter shapes: 6 * N + 12 * L * heads * head_dim * T, N
// without the input embedding unless it is tied; routed experts (".experts." parameters)
// weighted by k / E when the config has them.
double flops_per_token(models::Model& model, int64_t seq_len) {
  auto& hf = dynamic_cast<TransformersModel&>(model);
  const nlohmann::json config = hf.hf_config("float32");
  double routed = 1.0;
  const auto experts = config.contains("num_experts")
                           ? config["num_experts"]
                           : config.value("num_local_experts", nlohmann::json());
  if (experts.is_number() && config.contains("num_experts_per_tok") && experts.get<double>() > 0)
    routed = config["num_experts_per_tok"].get<double>() / experts.get<double>();
  const auto& f = hf.flops_numbers();  // layers, heads, head_dim
  return models::decoder_flops_per_token(
      model.named_parameters(), hf.input_embedding_name(), hf.tied(),
      [](const std::string& name) { return name.find(".experts.") != std::string::npos; }, routed,
      f[0], f[1], f[2], seq_len);
}

models::ModelSpec make_spec() {
  models::ModelSpec spec;
  spec.name = "transformers";
  spec.description = "Hugging Face Transformers' own model, trained by titan";
  spec.loads_pretrained_in_build = true;
  spec.overridable_ops = false;
  spec.build = build;
  spec.build_from_hf_config = build_from_hf_config;
  spec.parallelize = parallelize;
  spec.post_optimizer_build = [](models::Model&, const models::OptimizerHooks&) {};
  // The state dict is Transformers' own, in its in-memory names, which from_pretrained loads.
  spec.adapter.to_hf = [](const NamedTensors& native) { return native; };
  spec.adapter.from_hf = [](const std::vector<std::string>& keys,
                            const std::function<at::Tensor(const std::string&)>& read,
                            const NamedTensors& expected) {
    models::LazyTensors out;
    for (const auto& [name, _] : expected) {
      const at::Tensor view = read(name);
      out.emplace_back(name, models::LazyTensor{view, [view] { return view; }});
    }
    return out;
  };
  spec.flops_per_token = flops_per_token;
  spec.pipeline = [](models::Model& model, const models::StageParts& parts) {
    dynamic_cast<TransformersModel&>(model).keep_only(parts);
  };
  return spec;
}

}  // namespace
}  // namespace titan::transformers_backend

// The library's one entry point (models/transformers_backend.cpp looks it up).
extern "C" const titan::models::ModelSpec* titan_transformers_model_spec() {
  static const titan::models::ModelSpec spec = titan::transformers_backend::make_spec();
  return &spec;
}
