#include "titan/config/resolve.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "titan/common/did_you_mean.h"
#include "titan/common/error.h"
#include "titan/common/strings.h"
#include "titan/config/config_fields.h"
#include "titan/config/derived_defaults.h"
#include "titan/config/field_values.h"
#include "titan/config/toml_overlay.h"
#include "titan/config/torchtitan_keys.h"
#include "titan/config/validate.h"

namespace titan::config {
namespace {

struct Override {
  std::string section;
  std::string key;
  std::string value;
  std::string where;  // "--training.steps", for messages
};

std::string list_configs(const ConfigRegistry& registry, const std::string& module) {
  std::vector<std::string> names;
  for (const auto& fn : registry.functions(module)) names.push_back(fn.name);
  return join(names);
}

// An override of a key of torchtitan's that titan lacks (torchtitan_keys.h), e.g.
// `--compile.enable false`: set into its titan field, noted, or refused.
void apply_torchtitan_override(TrainerConfig& config, const Override& o,
                               ResolvedCommandLine& result) {
  const std::string key = o.section.empty() ? o.key : o.section + "." + o.key;
  const std::optional<TorchtitanKey> rule = torchtitan_key(key, o.value);
  if (!rule) {
    const std::vector<std::string> sections = section_names();
    if (std::find(sections.begin(), sections.end(), o.section) == sections.end()) {
      if (!is_torchtitan_section(o.section)) fail_unknown_section(o.section, o.where);
      fail(o.where, ": unknown config key \"", o.key, "\" in torchtitan's section [", o.section,
           "]", did_you_mean(o.key, torchtitan_section_keys(o.section)),
           "; the keys titan takes there: ", join(torchtitan_section_keys(o.section)));
    }
    fail_unknown_key(o.section, o.key, o.where);
  }
  const std::string shown = o.where + " " + o.value;
  switch (rule->action) {
    case TorchtitanKey::Action::kRefuse:
      fail(shown, ": ", rule->message);
    case TorchtitanKey::Action::kNote:
      result.notes.push_back(shown + ": " + rule->message);
      return;
    case TorchtitanKey::Action::kRename:
      break;
  }
  const auto [section, field] = split_dotted_key(rule->titan_key, o.where);
  std::string value = rule->value.empty() ? o.value : rule->value;
  if (rule->index >= 0) {
    // One element of a list (optimizer.beta1 is optimizer.betas[0]): the list with it replaced.
    std::vector<double> list = config.optimizer.betas;
    double element = 0;
    parse_cli_value(o.where, o.value, element);
    if (list.size() <= static_cast<size_t>(rule->index)) list.resize(rule->index + 1, 0.0);
    list[rule->index] = element;
    value = format_toml_value(list).substr(1);
    value.pop_back();  // "[0.9, 0.95]" -> "0.9, 0.95"
  }
  set_field_from_string(config, section, field, value, o.where);
  result.given_keys.insert(rule->titan_key);
  result.notes.push_back(shown + ": " + rule->message);
}

// "--name=value" -> {"--name", "value"}; "--name" -> {"--name", nullopt}.
std::pair<std::string, std::optional<std::string>> split_equals(const std::string& arg) {
  const size_t equals = arg.find('=');
  if (equals == std::string::npos) return {arg, std::nullopt};
  return {arg.substr(0, equals), arg.substr(equals + 1)};
}

}  // namespace

ResolvedCommandLine resolve_command_line(const std::vector<std::string>& args,
                                         const ResolveOptions& options) {
  const ConfigRegistry& registry = options.registry ? *options.registry : config_registry();
  ResolvedCommandLine result;
  std::vector<Override> overrides;

  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg.rfind("--", 0) != 0 || arg.size() == 2) {
      fail("unexpected argument \"", arg, "\"; expected --module, --config, --config-file or ",
           "--section.key overrides");
    }
    auto [name, inline_value] = split_equals(arg);
    // The value of an option: after '=' or the next argument.
    auto take_value = [&, &name = name, &inline_value = inline_value]() -> std::string {
      if (inline_value) return *inline_value;
      if (i + 1 >= args.size()) fail(name, " needs a value");
      return args[++i];
    };

    if (name == "--module") {
      result.module = take_value();
    } else if (name == "--config") {
      result.config_name = take_value();
    } else if (name == "--config-file" || name == "--job.config_file") {
      result.config_files.push_back(take_value());
    } else if (name.find('.') == std::string::npos &&
               torchtitan_key(name.substr(2), "").has_value()) {
      // torchtitan 0.3.0's top-level --hf_assets_path and --dump_folder.
      const std::string key = name.substr(2);
      overrides.push_back({"", key, take_value(), name});
    } else if (name.find('.') == std::string::npos) {
      const auto& accepted = options.extra_flags;
      if (std::find(accepted.begin(), accepted.end(), name) == accepted.end()) {
        std::string message =
            "unknown option \"" + name + "\"; expected --module, --config, --config-file";
        for (const auto& flag : accepted) message += ", " + flag;
        fail(message, " or --section.key overrides (see --help)");
      }
      if (inline_value) fail(name, " takes no value, got \"", *inline_value, "\"");
      result.flags.insert(name);
    } else {
      const std::string where = name;
      auto [section, key] = split_dotted_key(name.substr(2), where);
      std::string value;
      // torchtitan's booleans (`--compile.enable`) may be bare too.
      const bool bare_allowed = has_field(section, key) ? is_bool_field(section, key, where) : true;
      if (bare_allowed && !inline_value) {
        // A bare boolean flag means true; the argument right after it is its value unless it
        // is the next option (so `--a.b maybe` is an error naming --a.b, not a stray "maybe").
        const bool has_value = i + 1 < args.size() && args[i + 1].rfind("--", 0) != 0;
        value = has_value ? args[++i] : "true";
      } else {
        value = take_value();
      }
      overrides.push_back({section, key, value, where});
    }
  }
  result.print = result.flags.count("--print") > 0;

  const bool named = !result.module.empty() || !result.config_name.empty();
  // torchtitan's habit: `--job.config_file job.toml` alone (or with --module but no --config),
  // the file naming the model. The run then starts from the tree's defaults (what torchtitan's
  // JobConfig does with a file).
  const bool file_alone = result.config_name.empty() && !result.config_files.empty();
  if (file_alone && !result.module.empty()) registry.functions(result.module);  // known
  if ((options.require_config_function || named) && !file_alone) {
    if (result.module.empty()) {
      const auto modules = registry.modules();
      fail("--module is required (with --config); accepted modules: ",
           modules.empty() ? std::string("none registered") : join(modules));
    }
    if (result.config_name.empty()) {
      registry.functions(result.module);  // an unknown module fails here, listing them
      fail("--config is required; configs of module ", result.module, ": ",
           list_configs(registry, result.module));
    }
    result.config = registry.make(result.module, result.config_name);
  }
  for (const auto& path : result.config_files)
    apply_toml_file(result.config, path, &result.given_keys, &result.notes);
  if (file_alone && (options.require_config_function || !result.module.empty()) &&
      !(result.given_keys.count("model.name") && result.given_keys.count("model.flavor"))) {
    fail("--job.config_file ", join(result.config_files), " without ",
         result.module.empty() ? "--module and --config" : "--config",
         ": the file must name the model ([model] name and flavor, as torchtitan's "
         "train_configs do); or give --module M --config F as well");
  }
  if (file_alone && !result.module.empty()) {
    const auto& names = options.model_names;
    const std::string& model = result.config.model.name;
    if (std::find(names.begin(), names.end(), result.module) != names.end() &&
        model != result.module && model != "transformers")
      fail("--module ", result.module, " but --job.config_file ", join(result.config_files),
           " names model ", model, " ([model] name): give the module of its model (--module ",
           model, ") or none");
  }
  for (const auto& o : overrides) {
    if (o.section.empty() || !has_field(o.section, o.key)) {
      apply_torchtitan_override(result.config, o, result);
      continue;
    }
    set_field_from_string(result.config, o.section, o.key, o.value, o.where);
    result.given_keys.insert(o.section + "." + o.key);
  }
  apply_derived_defaults(result.config, result.given_keys, options.install_root, &result.notes);
  // LoRA settings that nothing turns on: a full fine-tune the user did not ask for.
  const auto& converters = result.config.model.converters;
  if (std::find(converters.begin(), converters.end(), "lora") == converters.end()) {
    std::vector<std::string> lora_keys;
    for (const std::string& key : result.given_keys)
      if (key.rfind("lora.", 0) == 0) lora_keys.push_back(key);
    if (!lora_keys.empty()) {
      result.warnings.push_back(join(lora_keys) + (lora_keys.size() == 1 ? " is" : " are") +
                                " set but model.converters does not name lora: this run trains "
                                "every weight (a full fine-tune); add --model.converters lora "
                                "for LoRA");
    }
  }
  if (options.validate) validate_config(result.config, options.model_names);
  return result;
}

std::vector<std::string> notes_to_print(const ResolvedCommandLine& resolved) {
  const std::string& mode = resolved.config.job.config_notes;
  if (mode == "off" || resolved.notes.empty()) return {};
  if (mode != "summary") return resolved.notes;
  return {std::to_string(resolved.notes.size()) + " setting" +
          (resolved.notes.size() == 1 ? " was" : "s were") +
          " renamed or asked nothing of titan (torchtitan's keys; `titan configs ... --print` "
          "lists them, job.config_notes each prints them here)"};
}

TrainerConfig resolve_config(const std::vector<std::string>& args, ResolveOptions options) {
  return resolve_command_line(args, options).config;
}

}  // namespace titan::config
