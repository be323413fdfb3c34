// Records of a dataset path that may be a weighted list ("a.jsonl:0.7,b.parquet:0.3",
// dataset_list.h): the list's sources read as one, in the order of their MixtureCycle
// (mixture_cycle.h). What record readers (preference pairs, preference_pairs.h) open; token
// documents mix at their own level (mixture_documents.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "titan/data/document_source.h"
#include "titan/data/mixture_cycle.h"

namespace titan::data {

class MixtureSource : public DocumentSource {
 public:
  struct Entry {
    std::unique_ptr<DocumentSource> source;
    double weight;
  };
  // Throws titan::Error when an entry has no record.
  MixtureSource(std::string description, std::vector<Entry> entries);
  int64_t size() const override { return cycle_.size(); }
  std::string text(int64_t index) override;
  nlohmann::ordered_json record(int64_t index) override;
  std::string location(int64_t index) const override;

 private:
  std::vector<Entry> entries_;
  MixtureCycle cycle_;
};

// `path` as a source of records: one dataset (a file, folder or glob; DocumentSource::open) or
// a weighted list of them. `text_field` as DocumentSource::open takes it ("" when only whole
// records are read: no text column is then required of Parquet and Arrow files). Errors name
// the list's entry.
std::unique_ptr<DocumentSource> open_record_source(const std::string& path,
                                                   const std::string& text_field = "");

}  // namespace titan::data
