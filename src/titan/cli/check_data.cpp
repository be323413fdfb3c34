// titan check-data --module M --config F [overrides] [--rows N]: reads a job's datasets up front,
// as training would, so that a bad line of a large corpus shows before a run rather than hours
// into it; or prints the first rows training packs.
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "titan/cli/commands.h"
#include "titan/cli/flag_parser.h"
#include "titan/cli/preference_data_check.h"
#include "titan/common/error.h"
#include "titan/config/field_values.h"
#include "titan/config/resolve.h"
#include "titan/data/data_loader.h"
#include "titan/data/token_documents.h"
#include "titan/data/tokenizer/tokenizer.h"
#include "titan/models/builtin_configs.h"
#include "titan/train/loader_options.h"
#include "titan/train/preference/preference_options.h"
#include "titan/train/report/run_warnings.h"

namespace titan::cli {
namespace {

constexpr const char* kHelp =
    R"(usage: titan check-data --module M --config F [--config-file job.toml] [--section.field value ...]
                        [--rows N]

Reads every document of the job's training.dataset_path (and validator.dataset_path when
validator.enable) as training reads it: each record parsed, tokenized with model.hf_assets_path's
tokenizer or, with training.sft, rendered with its chat template. A bad line of a large corpus
then shows now, not hours into a run. Prints, per dataset, its documents and tokens (and the
tokens trained, for SFT), and warns about SFT records that train nothing (roles the template
does not render, no assistant turn, an empty rendering). Exits non-zero when a document cannot
be read, naming the first (file:line) and counting the others.

--rows N prints instead the first N rows training packs (one process, training.packing), one
JSON object per line: {"input": [...], "labels": [...]} (-100: not trained), and
"positions": [...] with the block-causal packings.

With training.objective dpo it reads preference records instead (docs/preference.md): prints
their records, pairs and tokens, and warns per kind about the records that make no pair (a
missing field, an empty completion, chosen == rejected, ...) and the pairs cut to
dpo.max_length; a dataset where no record makes a pair is an error saying why. --rows N prints
the first N pairs as TRL tokenizes them: {"record": "file:line", "prompt_ids": [...],
"chosen_ids": [...], "rejected_ids": [...]}.
)";

// The value of `--rows N` (or --rows=N), taken out of `args`; -1 when absent.
int64_t take_rows(Args& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    std::string text;
    if (args[i] == "--rows") {
      TITAN_CHECK(i + 1 < args.size(), "--rows needs a value");
      text = args[i + 1];
      args.erase(args.begin() + static_cast<std::ptrdiff_t>(i), args.begin() + i + 2);
    } else if (args[i].rfind("--rows=", 0) == 0) {
      text = args[i].substr(7);
      args.erase(args.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      continue;
    }
    int64_t rows = 0;
    TITAN_CHECK(config::parse_int64(text, rows) && rows >= 1, "--rows \"", text,
                "\": expected a positive number of rows");
    return rows;
  }
  return -1;
}

void print_rows(const std::shared_ptr<const data::Tokenizer>& tokenizer, const std::string& path,
                data::LoaderOptions options, int64_t rows) {
  options.local_batch_size = 1;
  options.prefetch = 0;
  data::DataLoader loader(tokenizer, path, options);
  const auto row_of = [](const at::Tensor& t) {
    const at::Tensor row = t.reshape({-1}).contiguous();
    return std::vector<int64_t>(row.data_ptr<int64_t>(), row.data_ptr<int64_t>() + row.numel());
  };
  for (int64_t i = 0; i < rows; ++i) {
    const data::Batch batch = loader.next();
    nlohmann::json line = {{"input", row_of(batch.inputs)}, {"labels", row_of(batch.labels)}};
    if (batch.positions.defined()) line["positions"] = row_of(batch.positions);
    std::cout << line.dump() << "\n";
  }
  std::cout << std::flush;
}

// Reads every document of `path`; returns the number that could not be read. `key` names the
// setting the path came from.
int64_t check_dataset(const std::string& key, const std::string& path,
                      const std::shared_ptr<const data::Tokenizer>& tokenizer,
                      const data::LoaderOptions& options, std::string& first_error) {
  const std::unique_ptr<data::TokenDocuments> documents = data::open_token_documents(
      path, tokenizer, options.eos_id, options.text_field, options.chat_template);
  int64_t tokens = 0, trained = 0, bad = 0;
  std::vector<int32_t> ids;
  std::vector<uint8_t> trainable;
  for (int64_t i = 0; i < documents->size(); ++i) {
    try {
      documents->read_masked(i, ids, trainable);
    } catch (const data::DataReadError& e) {
      if (bad < 5) std::cout << "[titan] check-data: " << e.what() << std::endl;
      if (bad == 0) first_error = e.what();
      ++bad;
      continue;
    }
    tokens += static_cast<int64_t>(ids.size());
    for (const uint8_t t : trainable) trained += t;
  }
  std::cout << "[titan] check-data: " << key << " " << path << ": " << documents->size()
            << " documents, " << tokens << " tokens";
  if (options.chat_template) std::cout << " (" << trained << " trained: assistant turns)";
  if (bad > 0) std::cout << "; " << bad << " cannot be read";
  std::cout << std::endl;
  for (const std::string& line : documents->report()) train::print_warning(line);
  return bad;
}

// check-data of a DPO job (preference_data_check.h).
int check_preference_data(const config::TrainerConfig& cfg,
                          const std::shared_ptr<const data::Tokenizer>& tokenizer, int64_t rows) {
  const data::PreferenceLoaderOptions options = train::preference_loader_options(cfg, *tokenizer);
  if (rows > 0) {
    print_preference_pairs(tokenizer, cfg.training.dataset_path, options, rows);
    return 0;
  }
  std::string first_error;
  int64_t bad = check_preference_dataset("training.dataset_path", cfg.training.dataset_path,
                                         tokenizer, options, first_error);
  if (cfg.validator.enable) {
    bad += check_preference_dataset("validator.dataset_path", cfg.validator.dataset_path, tokenizer,
                                    options, first_error);
  }
  TITAN_CHECK(bad == 0, bad, " record", bad == 1 ? "" : "s",
              " cannot be read (training would stop there); the first: ", first_error);
  std::cout << "[titan] check-data: every record reads" << std::endl;
  return 0;
}

}  // namespace

int run_check_data(const Args& arguments) {
  if (wants_help(arguments)) {
    std::cout << kHelp;
    return 0;
  }
  Args args = arguments;
  const int64_t rows = take_rows(args);
  const config::ResolvedCommandLine resolved =
      config::resolve_command_line(args, models::builtin_resolve_options());
  const config::TrainerConfig& cfg = resolved.config;
  auto tokenizer = std::make_shared<const data::Tokenizer>(
      data::Tokenizer::from_directory(cfg.model.hf_assets_path));
  if (cfg.training.objective == "dpo") return check_preference_data(cfg, tokenizer, rows);
  const data::LoaderOptions options =
      train::loader_options(cfg, tokenizer->token_to_id(cfg.training.eos_token));
  if (rows > 0) {
    print_rows(tokenizer, cfg.training.dataset_path, options, rows);
    return 0;
  }
  std::string first_error;
  int64_t bad = check_dataset("training.dataset_path", cfg.training.dataset_path, tokenizer,
                              options, first_error);
  if (cfg.validator.enable) {
    bad += check_dataset("validator.dataset_path", cfg.validator.dataset_path, tokenizer, options,
                         first_error);
  }
  TITAN_CHECK(bad == 0, bad, " document", bad == 1 ? "" : "s",
              " cannot be read (training would stop there); the first: ", first_error);
  std::cout << "[titan] check-data: every document reads" << std::endl;
  return 0;
}

}  // namespace titan::cli
