#include "titan/data/mixture_documents.h"

#include "titan/common/error.h"

namespace titan::data {

namespace {

std::vector<int64_t> sizes_of(const std::vector<MixtureDocuments::Source>& sources,
                              const std::string& description) {
  std::vector<int64_t> sizes;
  for (const MixtureDocuments::Source& s : sources) {
    TITAN_CHECK(s.documents->size() > 0, "dataset ", s.documents->path(), " of mixture ",
                description, " is empty (no documents)");
    sizes.push_back(s.documents->size());
  }
  return sizes;
}

std::vector<double> weights_of(const std::vector<MixtureDocuments::Source>& sources) {
  std::vector<double> weights;
  for (const MixtureDocuments::Source& s : sources) weights.push_back(s.weight);
  return weights;
}

}  // namespace

MixtureDocuments::MixtureDocuments(std::string description, std::vector<Source> sources)
    : description_(std::move(description)),
      sources_(std::move(sources)),
      cycle_(sizes_of(sources_, description_), weights_of(sources_), description_) {}

MixtureDocuments::Pick MixtureDocuments::pick(int64_t index) const {
  const MixtureCycle::Pick p = cycle_.pick(index);
  return {p.source, p.item};
}

void MixtureDocuments::read(int64_t index, std::vector<int32_t>& out) {
  TITAN_CHECK(index >= 0 && index < size(), "document ", index, " is outside dataset mixture ",
              description_, " (", size(), " documents)");
  const Pick p = pick(index);
  sources_[p.source].documents->read(p.document, out);
}

void MixtureDocuments::read_masked(int64_t index, std::vector<int32_t>& out,
                                   std::vector<uint8_t>& trainable) {
  TITAN_CHECK(index >= 0 && index < size(), "document ", index, " is outside dataset mixture ",
              description_, " (", size(), " documents)");
  const Pick p = pick(index);
  sources_[p.source].documents->read_masked(p.document, out, trainable);
}

std::vector<std::string> MixtureDocuments::report() const {
  std::vector<std::string> lines;
  for (const Source& source : sources_)
    for (std::string& line : source.documents->report()) lines.push_back(std::move(line));
  return lines;
}

std::string MixtureDocuments::why_nothing_trains() const {
  std::string why;
  for (const Source& source : sources_) {
    const std::string one = source.documents->why_nothing_trains();
    if (!one.empty()) why += (why.empty() ? "" : "; ") + source.documents->path() + ": " + one;
  }
  return why;
}

}  // namespace titan::data
