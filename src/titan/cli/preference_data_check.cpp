#include "titan/cli/preference_data_check.h"

#include <iostream>

#include <nlohmann/json.hpp>

#include "titan/common/error.h"
#include "titan/data/mixture_source.h"
#include "titan/train/report/run_warnings.h"

namespace titan::cli {
namespace {

data::PreferencePairs open_pairs(const std::shared_ptr<const data::Tokenizer>& tokenizer,
                                 const std::string& path,
                                 const data::PreferenceLoaderOptions& options) {
  return data::PreferencePairs(data::open_record_source(path), tokenizer, options.chat_template,
                               options.eos_token, options.length);
}

}  // namespace

int64_t check_preference_dataset(const std::string& key, const std::string& path,
                                 const std::shared_ptr<const data::Tokenizer>& tokenizer,
                                 const data::PreferenceLoaderOptions& options,
                                 std::string& first_error) {
  data::PreferencePairs pairs = open_pairs(tokenizer, path, options);
  int64_t tokens = 0, bad = 0;
  for (int64_t i = 0; i < pairs.size(); ++i) {
    try {
      if (const auto pair = pairs.read(i))
        tokens += static_cast<int64_t>(2 * pair->prompt.size() + pair->chosen.size() +
                                       pair->rejected.size());
    } catch (const data::DataReadError& e) {
      if (bad < 5) std::cout << "[titan] check-data: " << e.what() << std::endl;
      if (bad == 0) first_error = e.what();
      ++bad;
    }
  }
  const data::PreferenceTally tally = pairs.tally();
  std::cout << "[titan] check-data: " << key << " " << path << ": " << pairs.size() << " records, "
            << tally.pairs << " preference pairs, " << tokens
            << " tokens (prompt + chosen and prompt + rejected, before any cut)";
  if (bad > 0) std::cout << "; " << bad << " cannot be read";
  std::cout << std::endl;
  for (const std::string& line : pairs.report()) train::print_warning(line);
  TITAN_CHECK(tally.pairs > 0 || bad > 0, "dataset ", path, ": ", tally.why_no_pair());
  return bad;
}

void print_preference_pairs(const std::shared_ptr<const data::Tokenizer>& tokenizer,
                            const std::string& path, const data::PreferenceLoaderOptions& options,
                            int64_t pairs) {
  data::PreferencePairs source = open_pairs(tokenizer, path, options);
  int64_t printed = 0;
  for (int64_t epoch = 0; printed < pairs; ++epoch) {
    int64_t found = 0;
    for (const int64_t record :
         data::preference_order(source.size(), options.shuffle_seed, epoch)) {
      const auto pair = source.read(record);
      if (!pair) continue;
      ++found;
      const nlohmann::json line = {{"record", source.location(record)},
                                   {"prompt_ids", pair->prompt},
                                   {"chosen_ids", pair->chosen},
                                   {"rejected_ids", pair->rejected}};
      std::cout << line.dump() << "\n";
      if (++printed == pairs) break;
    }
    TITAN_CHECK(found > 0, "dataset ", path, ": ", source.tally().why_no_pair());
  }
  std::cout << std::flush;
}

}  // namespace titan::cli
