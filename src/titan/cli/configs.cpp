// titan configs: lists the config functions of every module, or prints a resolved config
// (config function + --config-file + overrides) as TOML that `--config-file` reads back.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "titan/cli/commands.h"
#include "titan/cli/layout_check.h"
#include "titan/common/error.h"
#include "titan/common/strings.h"
#include "titan/config/config_fields.h"
#include "titan/config/field_values.h"
#include "titan/config/resolve.h"
#include "titan/config/validate.h"
#include "titan/distributed/parallel_dims.h"
#include "titan/kernels/override_resolver.h"
#include "titan/models/builtin_configs.h"
#include "titan/models/model_spec.h"
#include "titan/train/kernel_overrides.h"
#include "titan/train/precision.h"

namespace titan::cli {
namespace {

const char kUsage[] =
    "usage: titan configs [--module M]\n"
    "       titan configs --module M --config F [--config-file job.toml] [--section.key value "
    "...] --print\n"
    "\n"
    "Without --config, lists the modules and their config functions (only module M with\n"
    "--module). With --config, prints the resolved config as TOML: the config function, then\n"
    "each --config-file, then the overrides in order (--section.key value, --section.key=value;\n"
    "booleans also as a bare --section.key or --section.key true|false), each key under a\n"
    "comment that describes it. The output is a valid --config-file (or --job.config_file).\n"
    "Then the device mesh the parallelism section gives (as comments), for a world of\n"
    "WORLD_SIZE ranks, or --nproc-per-node N (x --nnodes M) as torchrun takes them (default:\n"
    "the product of the degrees, data_parallel_shard_degree -1 counting as 1): every degree,\n"
    "the ranks of each group of rank 0, and every rule training puts on the degrees, checked\n"
    "against the model (heads and MLP vs tp, experts vs ep, seq_len vs cp, the pipeline's\n"
    "stages, microbatches and schedule, LoRA under a pipeline, the global batch vs the data-\n"
    "parallel ranks): a layout that would stop training is an error (exit 2) here, before any\n"
    "launch.\n"
    "It ends with the kernel override table (as comments): which implementation\n"
    "of each overridable op every module path of the model uses, after override.imports and\n"
    "override.libraries.\n";

bool has(const Args& args, const std::string& flag) {
  return std::any_of(args.begin(), args.end(), [&](const std::string& arg) {
    return arg == flag || arg.rfind(flag + "=", 0) == 0;
  });
}

void list_configs(const config::ConfigRegistry& registry, const Args& args) {
  std::string only_module;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--module") {
      TITAN_CHECK(i + 1 < args.size(), "--module needs a value");
      only_module = args[++i];
    } else if (args[i].rfind("--module=", 0) == 0) {
      only_module = args[i].substr(9);
    } else {
      fail("unexpected argument \"", args[i], "\" without --config; see titan configs --help");
    }
  }
  if (!only_module.empty()) registry.functions(only_module);  // fails listing the modules
  for (const auto& module : registry.modules()) {
    if (!only_module.empty() && module != only_module) continue;
    std::cout << "module " << module << ":\n";
    for (const auto& fn : registry.functions(module)) {
      std::printf("  %-32s %s\n", fn.name.c_str(), fn.description.c_str());
    }
    std::fflush(stdout);
  }
}

// Which implementation each op uses at each call site of the model the config builds: the
// model is built on the meta device (no memory), with the kernels resolved for the device and
// compute dtype the config trains with.
// "hidden 256, layers 4, heads 8 / kv 4, head_dim 64, intermediate 768, vocabulary 151936,
// tied": the dimensions of a model's Hugging Face config, for the printed config.
std::string describe_dimensions(const nlohmann::json& hf) {
  const auto get = [&](const char* key) { return hf.value(key, int64_t{0}); };
  std::string out =
      "hidden " + std::to_string(get("hidden_size")) + ", layers " +
      std::to_string(get("num_hidden_layers")) + ", heads " +
      std::to_string(get("num_attention_heads")) + " / kv " +
      std::to_string(get("num_key_value_heads")) + ", head_dim " +
      std::to_string(hf.contains("head_dim") && hf["head_dim"].is_number_integer()
                         ? get("head_dim")
                         : get("hidden_size") / std::max<int64_t>(1, get("num_attention_heads"))) +
      ", intermediate " + std::to_string(get("intermediate_size")) + ", vocabulary " +
      std::to_string(get("vocab_size"));
  if (get("num_experts") > 0)
    out += ", experts " + std::to_string(get("num_experts")) + " (top " +
           std::to_string(get("num_experts_per_tok")) + ", " +
           std::to_string(get("moe_intermediate_size")) + " wide)";
  out += hf.value("tie_word_embeddings", false) ? ", tied embeddings" : ", untied";
  return out;
}

std::vector<std::string> override_table(const config::TrainerConfig& cfg, std::string* dimensions) {
  const train::Precision precision = train::resolve_precision(cfg.training);
  kernels::OverrideResolver resolver = train::make_override_resolver(cfg, precision);
  models::BuildOptions build;
  build.device = at::kMeta;
  build.param_dtype = precision.param_dtype;
  build.compute_dtype = precision.compute_dtype;
  build.init_weights = false;
  build.overrides = &resolver;
  const models::ModelSpec& spec = models::get_model_spec(cfg.model.name);
  std::vector<std::string> notes;
  if (spec.overridable_ops) {
    try {
      const std::unique_ptr<models::Model> model = spec.build(cfg, build);
      *dimensions = describe_dimensions(model->hf_config("float32"));
    } catch (const kernels::OverrideError&) {
      throw;
    } catch (const Error& e) {
      // Printing a config needs no model: say why its call sites are not listed.
      return {std::string("(the model's call sites need the model: ") + e.what() + ")"};
    }
  } else {
    notes.push_back("(model " + spec.name + " runs its own ops; only the loss is titan's)");
  }
  resolver.resolve(kernels::Op::kCrossEntropy, "output");
  resolver.finish();
  std::vector<std::string> lines = resolver.summary(/*include_reference=*/true);
  lines.insert(lines.end(), notes.begin(), notes.end());
  return lines;
}

// The mesh the parallelism section lays out over `world` ranks, as comment lines. Throws
// titan::Error (naming the world) when the degrees do not fit that world: such a config cannot
// train there.
std::vector<std::string> mesh_lines(const config::TrainerConfig& cfg, int64_t given_world) {
  const config::ParallelismConfig& p = cfg.parallelism;
  int64_t world = p.data_parallel_replicate_degree *
                  std::max<int64_t>(1, p.data_parallel_shard_degree) * p.context_parallel_degree *
                  p.tensor_parallel_degree * p.pipeline_parallel_degree;
  if (const char* env = std::getenv("WORLD_SIZE"); env != nullptr && *env != '\0') {
    int64_t given = 0;
    if (config::parse_int64(env, given) && given >= 1) world = given;
  }
  if (given_world > 0) world = given_world;
  std::vector<std::string> lines;
  try {
    const distributed::ParallelDims dims = distributed::make_parallel_dims(p, world);
    // Every rule training puts on the degrees, before any launch.
    const std::vector<std::string> checked = layout_check(cfg, dims);
    const distributed::MeshLayout mesh(dims);
    std::string degrees;
    for (const auto& [name, degree] : dims.named())
      degrees += (degrees.empty() ? "" : ", ") + name + " " + std::to_string(degree);
    lines.push_back("world " + std::to_string(world) + ": " + degrees + ", efsdp " +
                    std::to_string(dims.efsdp()) + " (ep and efsdp share dp_shard x cp x tp)");
    for (const std::string& group : distributed::MeshLayout::group_names()) {
      if (mesh.size_of(group) == 1 && group != "world") continue;
      std::string ranks;
      for (int64_t r : mesh.members(group, 0))
        ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
      lines.push_back("  " + group + " of rank 0: ranks " + ranks);
    }
    for (const std::string& line : checked) lines.push_back("checked: " + line);
  } catch (const Error& e) {
    fail("the parallelism section does not lay out a world of ", world, " ranks",
         std::getenv("WORLD_SIZE") ? " (WORLD_SIZE)" : "", ": ", e.what());
  }
  return lines;
}

}  // namespace

int run_configs(const Args& args) {
  if (has(args, "--help") || has(args, "-h")) {
    std::cout << kUsage;
    return 0;
  }
  const config::ConfigRegistry& registry = models::builtin_config_registry();
  if (!has(args, "--config") && !has(args, "--print")) {
    list_configs(registry, args);
    return 0;
  }
  // torchrun's --nproc-per-node (and --nnodes): the world the layout is checked for.
  Args rest;
  int64_t nproc = 0, nnodes = 1;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string flag = args[i].substr(0, args[i].find('='));
    const bool is_nproc = flag == "--nproc-per-node" || flag == "--nproc_per_node";
    if (!is_nproc && flag != "--nnodes") {
      rest.push_back(args[i]);
      continue;
    }
    std::string text;
    if (args[i].find('=') != std::string::npos) {
      text = args[i].substr(args[i].find('=') + 1);
    } else {
      TITAN_CHECK(i + 1 < args.size(), flag, " needs a value");
      text = args[++i];
    }
    int64_t value = 0;
    TITAN_CHECK(config::parse_int64(text, value) && value >= 1, flag, " ", text,
                ": expected a positive number of processes");
    (is_nproc ? nproc : nnodes) = value;
  }
  config::ResolveOptions options = models::builtin_resolve_options();
  options.extra_flags = {"--print"};
  const auto resolved = config::resolve_command_line(rest, options);
  // Resolved before anything is printed: a bad override or an impossible mesh prints nothing
  // but the error.
  std::string dimensions;
  const std::vector<std::string> table = override_table(resolved.config, &dimensions);
  const std::vector<std::string> mesh = mesh_lines(resolved.config, nproc * nnodes);
  if (resolved.module.empty())
    std::cout << "# config file " << join(resolved.config_files) << "\n";
  else
    std::cout << "# module " << resolved.module << ", config " << resolved.config_name << "\n";
  for (const std::string& note : resolved.notes) std::cout << "# note: " << note << "\n";
  for (const std::string& warning : resolved.warnings)
    std::cout << "# warning: " << warning << "\n";
  if (!dimensions.empty()) std::cout << "# model dimensions: " << dimensions << "\n";
  std::cout << config::to_toml(resolved.config, /*with_descriptions=*/true);
  std::cout << "\n# device mesh and layout check (WORLD_SIZE or --nproc-per-node N [--nnodes M] "
               "for another world):\n";
  for (const std::string& line : mesh) std::cout << "#   " << line << "\n";
  std::cout << "\n# kernel overrides, resolved for this model (op: module paths -> "
               "implementation):\n";
  for (const std::string& line : table) std::cout << "#   " << line << "\n";
  return 0;
}

}  // namespace titan::cli
