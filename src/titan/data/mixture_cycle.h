// The order of a weighted mixture of several datasets (training.dataset_path =
// "a.jsonl:0.7,b.jsonl:0.3", dataset_list.h), whatever its items are (token documents,
// mixture_documents.h; records, mixture_source.h). The weights become small integer counts c_i
// (0.7 : 0.3 -> 7 : 3; see mixture_counts) and a cycle of P = sum(c_i) picks is laid out once
// by smooth weighted round-robin, so every source's picks are spread evenly through the cycle
// and source i gives exactly c_i of its P items. Each source is read in its own order and
// wraps on its own: a small source with a large weight repeats within the mixture.
//
// Mixture item k is pick k % P of cycle k / P; which item of its source that is follows by
// arithmetic, so pick(k) is O(1) after the O(P) table and a resumed run seeks exactly.
// size() is one mixture epoch: the whole cycles needed for every source to give each of its
// items at least once, ceil(max_i size_i / c_i) * P.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace titan::data {

// Picks per cycle for each weight: the smallest integers in the weights' ratios when these are
// ratios of integers up to 1000 (0.7 : 0.3 -> 7 : 3, 2 : 1, 0.5 : 0.3 : 0.2 -> 5 : 3 : 2);
// otherwise the weights rounded to parts of 2^16 of their total (at least 1 each).
std::vector<int64_t> mixture_counts(const std::vector<double>& weights);

class MixtureCycle {
 public:
  // `sizes[i]` items in source i (each > 0), picked in the ratios of `weights`; `description`
  // names the mixture in errors.
  MixtureCycle(const std::vector<int64_t>& sizes, const std::vector<double>& weights,
               const std::string& description);

  int64_t size() const { return size_; }  // one mixture epoch

  // Which source gives mixture item `index`, and its index in that source.
  struct Pick {
    size_t source;
    int64_t item;
  };
  Pick pick(int64_t index) const;

  int64_t length() const { return static_cast<int64_t>(cycle_.size()); }  // P
  int64_t count(size_t source) const { return counts_[source]; }          // c_i

 private:
  struct Slot {
    uint32_t source;
    int64_t rank;  // how many picks of the same source come before it in the cycle
  };
  std::vector<int64_t> sizes_;
  std::vector<int64_t> counts_;  // c_i
  std::vector<Slot> cycle_;      // the P picks of one cycle
  int64_t size_ = 0;
};

}  // namespace titan::data
