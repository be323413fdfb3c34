#include "titan/data/mixture_source.h"

#include <filesystem>

#include "titan/common/error.h"
#include "titan/data/dataset_list.h"

namespace titan::data {
namespace {

std::vector<int64_t> sizes_of(const std::vector<MixtureSource::Entry>& entries,
                              const std::string& description) {
  std::vector<int64_t> sizes;
  for (const MixtureSource::Entry& e : entries) {
    TITAN_CHECK(e.source->size() > 0, "dataset ", e.source->path(), " of mixture ", description,
                " is empty (no records)");
    sizes.push_back(e.source->size());
  }
  return sizes;
}

std::vector<double> weights_of(const std::vector<MixtureSource::Entry>& entries) {
  std::vector<double> weights;
  for (const MixtureSource::Entry& e : entries) weights.push_back(e.weight);
  return weights;
}

}  // namespace

MixtureSource::MixtureSource(std::string description, std::vector<Entry> entries)
    : DocumentSource(std::move(description)),
      entries_(std::move(entries)),
      cycle_(sizes_of(entries_, path_), weights_of(entries_), path_) {}

std::string MixtureSource::text(int64_t index) {
  const MixtureCycle::Pick p = cycle_.pick(index);
  return entries_[p.source].source->text(p.item);
}

nlohmann::ordered_json MixtureSource::record(int64_t index) {
  const MixtureCycle::Pick p = cycle_.pick(index);
  return entries_[p.source].source->record(p.item);
}

std::string MixtureSource::location(int64_t index) const {
  const MixtureCycle::Pick p = cycle_.pick(index);
  return entries_[p.source].source->location(p.item);
}

std::unique_ptr<DocumentSource> open_record_source(const std::string& path,
                                                   const std::string& text_field) {
  // A path that exists as written is one dataset even when it holds ',' or ':'.
  std::error_code ec;
  if (std::filesystem::exists(path, ec)) return DocumentSource::open(path, text_field);
  const std::vector<DatasetEntry> entries = parse_dataset_list(path);
  if (is_single_dataset(entries)) return DocumentSource::open(path, text_field);
  std::vector<MixtureSource::Entry> sources;
  for (size_t i = 0; i < entries.size(); ++i) {
    const DatasetEntry& entry = entries[i];
    const std::string where = "entry " + std::to_string(i + 1) + " (\"" + entry.text +
                              "\") of dataset list \"" + path + "\"";
    TITAN_CHECK(is_glob(entry.path) || std::filesystem::exists(entry.path, ec), where, ": ",
                entry.path, " does not exist");
    try {
      sources.push_back({DocumentSource::open(entry.path, text_field), entry.weight});
      TITAN_CHECK(sources.back().source->size() > 0, entry.path, " has no records");
    } catch (const Error& e) {
      fail(where, ": ", e.what());
    }
  }
  return std::make_unique<MixtureSource>(path, std::move(sources));
}

}  // namespace titan::data
