// A weighted mixture of several datasets read as one (training.dataset_path =
// "a.jsonl:0.7,b.jsonl:0.3", dataset_list.h), in the order of their MixtureCycle
// (mixture_cycle.h: every source's picks spread evenly through a cycle, each source read in its
// own order and wrapping on its own). size() is one mixture epoch; then the token stream starts
// the mixture over (every source from its first document).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "titan/data/mixture_cycle.h"
#include "titan/data/token_documents.h"

namespace titan::data {

class MixtureDocuments : public TokenDocuments {
 public:
  struct Source {
    std::unique_ptr<TokenDocuments> documents;
    double weight;
  };
  // `description` names the mixture in messages. Throws titan::Error when a source has no
  // document.
  MixtureDocuments(std::string description, std::vector<Source> sources);

  int64_t size() const override { return cycle_.size(); }
  void read(int64_t index, std::vector<int32_t>& out) override;
  // The source's own flags (an SFT mixture keeps its prompts untrained).
  void read_masked(int64_t index, std::vector<int32_t>& out,
                   std::vector<uint8_t>& trainable) override;
  const std::string& path() const override { return description_; }
  std::vector<std::string> report() const override;  // every source's
  std::string why_nothing_trains() const override;

  // Which source gives mixture document `index`, and its index in that source.
  struct Pick {
    size_t source;
    int64_t document;
  };
  Pick pick(int64_t index) const;

  int64_t cycle_length() const { return cycle_.length(); }
  int64_t picks_per_cycle(size_t source) const { return cycle_.count(source); }

 private:
  std::string description_;
  std::vector<Source> sources_;
  MixtureCycle cycle_;
};

}  // namespace titan::data
