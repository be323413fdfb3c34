// titan configs: lists the config functions of every module, or prints a resolved config
// (config function + --config-file + overrides) as TOML that `--config-file` reads back.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "titan/cli/commands.h"
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
    "WORLD_SIZE ranks (default: the product of the degrees, data_parallel_shard_degree -1\n"
    "counting as 1): every degree, and the ranks of each group of rank 0; degrees that do not\n"
    "lay out that world are an error (exit 2).\n"
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
std::vector<std::string> override_table(const config::TrainerConfig& cfg) {
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
std::vector<std::string> mesh_lines(const config::ParallelismConfig& p) {
  int64_t world = p.data_parallel_replicate_degree *
                  std::max<int64_t>(1, p.data_parallel_shard_degree) * p.context_parallel_degree *
                  p.tensor_parallel_degree * p.pipeline_parallel_degree;
  if (const char* env = std::getenv("WORLD_SIZE"); env != nullptr && *env != '\0') {
    int64_t given = 0;
    if (config::parse_int64(env, given) && given >= 1) world = given;
  }
  std::vector<std::string> lines;
  try {
    const distributed::ParallelDims dims = distributed::make_parallel_dims(p, world);
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
  config::ResolveOptions options = models::builtin_resolve_options();
  options.extra_flags = {"--print"};
  const auto resolved = config::resolve_command_line(args, options);
  // Resolved before anything is printed: a bad override or an impossible mesh prints nothing
  // but the error.
  const std::vector<std::string> table = override_table(resolved.config);
  const std::vector<std::string> mesh = mesh_lines(resolved.config.parallelism);
  if (resolved.module.empty())
    std::cout << "# config file " << join(resolved.config_files) << "\n";
  else
    std::cout << "# module " << resolved.module << ", config " << resolved.config_name << "\n";
  for (const std::string& note : resolved.notes) std::cout << "# note: " << note << "\n";
  for (const std::string& warning : resolved.warnings)
    std::cout << "# warning: " << warning << "\n";
  std::cout << config::to_toml(resolved.config, /*with_descriptions=*/true);
  std::cout << "\n# device mesh (set WORLD_SIZE for another world):\n";
  for (const std::string& line : mesh) std::cout << "#   " << line << "\n";
  std::cout << "\n# kernel overrides, resolved for this model (op: module paths -> "
               "implementation):\n";
  for (const std::string& line : table) std::cout << "#   " << line << "\n";
  return 0;
}

}  // namespace titan::cli
