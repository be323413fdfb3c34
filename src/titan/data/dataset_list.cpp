#include "titan/data/dataset_list.h"

#include <charconv>
#include <cmath>

#include "titan/common/error.h"

namespace titan::data {
namespace {

std::string trim(const std::string& s) {
  const size_t begin = s.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(" \t") - begin + 1);
}

// "entry 2 (\"b.jsonl:0\") of dataset list \"a.jsonl,b.jsonl:0\""
std::string describe(size_t index, const std::string& entry, const std::string& list) {
  return "entry " + std::to_string(index + 1) + " (\"" + entry + "\") of dataset list \"" + list +
         "\"";
}

DatasetEntry parse_entry(size_t index, const std::string& text, const std::string& list) {
  TITAN_CHECK(!text.empty(), "dataset list \"", list, "\": entry ", index + 1,
              " is empty; write PATH or PATH:WEIGHT between the commas");
  DatasetEntry entry{text, 1.0, false, text};
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos) return entry;
  const std::string weight = text.substr(colon + 1);
  TITAN_CHECK(!weight.empty(), describe(index, text, list),
              ": nothing after the ':'; write PATH:WEIGHT with a positive weight");
  double value = 0;
  const char* end = weight.data() + weight.size();
  const auto [ptr, ec] = std::from_chars(weight.data(), end, value);
  if (ptr != end || (ec != std::errc() && ec != std::errc::result_out_of_range)) {
    return entry;  // not a number: the ':' belongs to the path
  }
  TITAN_CHECK(ec == std::errc() && std::isfinite(value) && value > 0, describe(index, text, list),
              ": weight ", weight, " must be a positive finite number");
  entry.path = trim(text.substr(0, colon));
  TITAN_CHECK(!entry.path.empty(), describe(index, text, list), ": no path before the weight");
  entry.weight = value;
  entry.weighted = true;
  return entry;
}

}  // namespace

std::vector<DatasetEntry> parse_dataset_list(const std::string& list) {
  std::vector<std::string> texts;
  size_t start = 0;
  for (size_t comma; (comma = list.find(',', start)) != std::string::npos; start = comma + 1) {
    texts.push_back(trim(list.substr(start, comma - start)));
  }
  texts.push_back(trim(list.substr(start)));
  // A lone path is taken as written (no trimming, empty allowed): the single-dataset case
  // opens and reports it exactly as before lists existed.
  if (texts.size() == 1 && list.rfind(':') == std::string::npos) {
    return {DatasetEntry{list, 1.0, false, list}};
  }
  std::vector<DatasetEntry> entries;
  for (size_t i = 0; i < texts.size(); ++i) entries.push_back(parse_entry(i, texts[i], list));
  if (entries.size() == 1 && !entries[0].weighted) entries[0] = {list, 1.0, false, list};
  return entries;
}

bool is_single_dataset(const std::vector<DatasetEntry>& entries) {
  return entries.size() == 1 && !entries[0].weighted;
}

}  // namespace titan::data
