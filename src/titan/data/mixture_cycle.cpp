#include "titan/data/mixture_cycle.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "titan/common/error.h"

namespace titan::data {
namespace {

constexpr int64_t kMaxDenominator = 1000;
constexpr int64_t kMaxCycle = int64_t{1} << 20;
constexpr double kRoundingParts = 65536;

// num/den with den <= kMaxDenominator equal to x up to rounding (continued fractions), or false.
bool small_ratio(double x, int64_t& num, int64_t& den) {
  int64_t h0 = 1, h1 = 0, k0 = 0, k1 = 1;  // convergents h/k: current and previous
  double rest = x;
  for (int step = 0; step < 64; ++step) {
    const double whole = std::floor(rest);
    if (whole > static_cast<double>(kMaxCycle)) return false;
    const auto a = static_cast<int64_t>(whole);
    const int64_t h = a * h0 + h1, k = a * k0 + k1;
    if (k > kMaxDenominator) return false;
    h1 = h0, h0 = h, k1 = k0, k0 = k;
    if (std::abs(x - static_cast<double>(h) / static_cast<double>(k)) <= 1e-9 * x) {
      num = h, den = k;
      return true;
    }
    rest = 1.0 / (rest - whole);
    if (!std::isfinite(rest)) return false;
  }
  return false;
}

std::vector<int64_t> reduced(std::vector<int64_t> counts) {
  int64_t g = 0;
  for (int64_t c : counts) g = std::gcd(g, c);
  for (int64_t& c : counts) c /= g;
  return counts;
}

// The weights as ratios of integers: each relative to the smallest, over a common denominator.
bool exact_counts(const std::vector<double>& weights, std::vector<int64_t>& counts) {
  const double smallest = *std::min_element(weights.begin(), weights.end());
  std::vector<int64_t> nums, dens;
  int64_t common = 1;
  for (double w : weights) {
    int64_t num = 0, den = 1;
    if (!small_ratio(w / smallest, num, den)) return false;
    nums.push_back(num);
    dens.push_back(den);
    common = std::lcm(common, den);
    if (common > kMaxCycle) return false;
  }
  counts.clear();
  double total = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    total += static_cast<double>(nums[i]) * static_cast<double>(common / dens[i]);
    if (total > static_cast<double>(kMaxCycle)) return false;
    counts.push_back(nums[i] * (common / dens[i]));
  }
  counts = reduced(counts);
  return true;
}

}  // namespace

std::vector<int64_t> mixture_counts(const std::vector<double>& weights) {
  TITAN_CHECK(!weights.empty(), "a dataset mixture needs at least one source");
  for (double w : weights) {
    TITAN_CHECK(std::isfinite(w) && w > 0, "dataset mixture weight ", w,
                " must be a positive finite number");
  }
  std::vector<int64_t> counts;
  if (exact_counts(weights, counts)) return counts;
  double total = 0;
  for (double w : weights) total += w / weights.size();  // averaged: no overflow to inf
  counts.clear();
  for (double w : weights) {
    counts.push_back(std::max<int64_t>(
        1, std::llround(w / total / static_cast<double>(weights.size()) * kRoundingParts)));
  }
  return reduced(counts);
}

MixtureCycle::MixtureCycle(const std::vector<int64_t>& sizes, const std::vector<double>& weights,
                           const std::string& description)
    : sizes_(sizes), counts_(mixture_counts(weights)) {
  // Smooth weighted round-robin: each pick, every source gains its count and the one with the
  // most credit (the first on a tie) is picked and pays the cycle's length. Over a cycle source
  // i is picked exactly c_i times, spread evenly.
  const int64_t length = std::accumulate(counts_.begin(), counts_.end(), int64_t{0});
  std::vector<int64_t> credit(counts_.size(), 0), seen(counts_.size(), 0);
  cycle_.reserve(static_cast<size_t>(length));
  for (int64_t k = 0; k < length; ++k) {
    size_t best = 0;
    for (size_t i = 0; i < counts_.size(); ++i) {
      credit[i] += counts_[i];
      if (credit[i] > credit[best]) best = i;
    }
    credit[best] -= length;
    cycle_.push_back({static_cast<uint32_t>(best), seen[best]++});
  }

  int64_t cycles = 1;
  for (size_t i = 0; i < sizes_.size(); ++i)
    cycles = std::max(cycles, (sizes_[i] + counts_[i] - 1) / counts_[i]);
  TITAN_CHECK(cycles <= std::numeric_limits<int64_t>::max() / length, "dataset mixture ",
              description, " is too large to index");
  size_ = cycles * length;
}

MixtureCycle::Pick MixtureCycle::pick(int64_t index) const {
  const int64_t P = length();
  const Slot& slot = cycle_[static_cast<size_t>(index % P)];
  const int64_t nth = index / P * counts_[slot.source] + slot.rank;
  return {slot.source, nth % sizes_[slot.source]};
}

}  // namespace titan::data
