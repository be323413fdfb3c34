// `titan SUBCOMMAND [args]`: dispatches to one function per subcommand.
#include <cstdio>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "titan/cli/commands.h"
#include "titan/cli/config_groups.h"
#include "titan/cli/elastic_error_file.h"
#include "titan/common/did_you_mean.h"
#include "titan/common/error.h"
#include "titan/models/builtin_configs.h"

namespace {

struct Subcommand {
  const char* name;
  int (*run)(const titan::cli::Args&);
  const char* summary;
};

const Subcommand kSubcommands[] = {
    {"train", titan::cli::run_train, "train a model (--module M --config F [overrides])"},
    {"configs", titan::cli::run_configs, "list config functions or print a resolved config"},
    {"check-data", titan::cli::run_check_data,
     "read a job's datasets up front (bad lines, SFT records that train nothing)"},
    {"forward", titan::cli::run_forward, "logits for given token ids, as safetensors"},
    {"eval", titan::cli::run_eval, "mean token loss of a model on a dataset"},
    {"generate", titan::cli::run_generate, "sample text from a model"},
    {"convert", titan::cli::run_convert, "training checkpoint <-> Hugging Face directory"},
    {"tokenize", titan::cli::run_tokenize, "corpus -> token shards"},
    {"encode", titan::cli::run_encode, "text on stdin -> token ids (JSON)"},
    {"render-chat", titan::cli::run_render_chat, "chat records -> SFT text, ids, trained ids"},
    {"decode", titan::cli::run_decode, "token ids (JSON) on stdin -> text"},
    {"plot", titan::cli::run_plot, "a run's metrics.jsonl -> PNG (loss, lr, tokens/s, memory)"},
};

void print_usage() {
  std::cout << "usage: titan SUBCOMMAND [--help] [args]\n       titan --version\n\nsubcommands:\n";
  for (const auto& s : kSubcommands) std::printf("  %-12s %s\n", s.name, s.summary);
  // What `titan train --module M --config F` starts from, by purpose.
  std::cout << "\nconfig functions (titan train --module M --config F; `titan configs --module M` "
               "describes each):\n";
  const titan::config::ConfigRegistry& registry = titan::models::builtin_config_registry();
  for (const std::string& module : registry.modules()) {
    std::cout << "  module " << module << "\n";
    for (const auto& [title, names] : titan::cli::config_groups(registry, module)) {
      std::string line = "    " + title + ":";
      for (size_t i = 0; i < names.size(); ++i) {
        const std::string item = " " + names[i] + (i + 1 < names.size() ? "," : "");
        if (line.size() + item.size() > 100) {
          std::cout << line << "\n";
          line = "     ";
        }
        line += item;
      }
      std::cout << line << "\n";
    }
  }
}

// The one line an error ends the process with, also handed to torchrun when it launched us.
int report(const std::string& message, int code) {
  std::cerr << "error: " << message << "\n";
  titan::cli::write_elastic_error_file(message);
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    print_usage();
    return argc < 2 ? 2 : 0;
  }
  const std::string name = argv[1];
  const titan::cli::Args args(argv + 2, argv + argc);
  if (name == "--version" || name == "-V") return titan::cli::run_version(args);
  for (const auto& s : kSubcommands) {
    if (name != s.name) continue;
    try {
      return s.run(args);
    } catch (const titan::Error& e) {
      return report(e.what(), 2);
    } catch (const std::exception& e) {
      return report(e.what(), 1);
    }
  }
  std::vector<std::string> names;
  for (const auto& s : kSubcommands) names.emplace_back(s.name);
  return report("unknown subcommand '" + name + "'" + titan::did_you_mean(name, names) +
                    "; run 'titan --help' for the list",
                2);
}
