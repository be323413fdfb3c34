// A weighted mixture of several datasets read as one (training.dataset_path =
// "a.jsonl:0.7,b.jsonl:0.3", dataset_list.h). The weights become small integer counts c_i
// (0.7 : 0.3 -> 7 : 3; see mixture_counts) and a cycle of P = sum(c_i) picks is laid out once
// by smooth weighted round-robin, so every source's picks are spread evenly through the cycle
// and source i gives exactly c_i of its P documents. Each source is read in its own order and
// wraps on its own: a small source with a large weight repeats within the mixture.
//
// Mixture document k is pick k % P of cycle k / P; which document of its source that is follows
// by arithmetic, so read(k) is O(1) after the O(P) table and a resumed run seeks exactly.
// size() is one mixture epoch: the whole cycles needed for every source to give each of its
// documents at least once, ceil(max_i size_i / c_i) * P; then the token stream starts the
// mixture over (every source from its first document).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "titan/data/token_documents.h"

namespace titan::data {

// Picks per cycle for each weight: the smallest integers in the weights' ratios when these are
// ratios of integers up to 1000 (0.7 : 0.3 -> 7 : 3, 2 : 1, 0.5 : 0.3 : 0.2 -> 5 : 3 : 2);
// otherwise the weights rounded to parts of 2^16 of their total (at least 1 each).
std::vector<int64_t> mixture_counts(const std::vector<double>& weights);

class MixtureDocuments : public TokenDocuments {
 public:
  struct Source {
    std::unique_ptr<TokenDocuments> documents;
    double weight;
  };
  // `description` names the mixture in messages. Throws titan::Error when a source has no
  // document.
  MixtureDocuments(std::string description, std::vector<Source> sources);

  int64_t size() const override { return size_; }
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

  int64_t cycle_length() const { return static_cast<int64_t>(cycle_.size()); }
  int64_t picks_per_cycle(size_t source) const { return counts_[source]; }

 private:
  struct Slot {
    uint32_t source;
    int64_t rank;  // how many picks of the same source come before it in the cycle
  };
  std::string description_;
  std::vector<Source> sources_;
  std::vector<int64_t> counts_;  // c_i
  std::vector<Slot> cycle_;      // the P picks of one cycle
  int64_t size_ = 0;
};

}  // namespace titan::data
