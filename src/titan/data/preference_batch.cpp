#include "titan/data/preference_batch.h"

#include <algorithm>

#include "titan/common/error.h"

namespace titan::data {
namespace {

constexpr int64_t kIgnoredLabel = -100;

struct Sequence {
  std::vector<int32_t> ids;
  std::vector<uint8_t> completion;  // 1 on completion tokens
};

Sequence cut(const std::vector<int32_t>& prompt, const std::vector<int32_t>& completion,
             const PairLength& length) {
  Sequence s;
  s.ids = prompt;
  s.ids.insert(s.ids.end(), completion.begin(), completion.end());
  s.completion.assign(prompt.size(), 0);
  s.completion.resize(s.ids.size(), 1);
  const auto n = static_cast<int64_t>(s.ids.size());
  if (length.max_length >= 0 && n > length.max_length) {
    const auto drop = static_cast<std::ptrdiff_t>(n - length.max_length);
    if (length.keep_end) {
      s.ids.erase(s.ids.begin(), s.ids.begin() + drop);
      s.completion.erase(s.completion.begin(), s.completion.begin() + drop);
    } else {
      s.ids.resize(static_cast<size_t>(length.max_length));
      s.completion.resize(static_cast<size_t>(length.max_length));
    }
  }
  return s;
}

}  // namespace

PairBatch collate_pairs(const std::vector<TokenizedPair>& pairs,
                        const std::vector<int64_t>& records, const PairLength& length,
                        int32_t pad_id, int64_t pad_multiple) {
  TITAN_CHECK(!pairs.empty() && records.size() == pairs.size() && pad_multiple >= 1,
              "collate_pairs: ", pairs.size(), " pairs, ", records.size(),
              " records, pad multiple ", pad_multiple);
  std::vector<Sequence> rows;
  for (const TokenizedPair& p : pairs) rows.push_back(cut(p.prompt, p.chosen, length));
  for (const TokenizedPair& p : pairs) rows.push_back(cut(p.prompt, p.rejected, length));
  int64_t longest = 1;
  for (const Sequence& s : rows)
    longest = std::max(longest, static_cast<int64_t>(s.ids.size()) - 1);
  const int64_t T = (longest + pad_multiple - 1) / pad_multiple * pad_multiple;
  const auto R = static_cast<int64_t>(rows.size());

  PairBatch b;
  b.rows.inputs = at::full({R, T}, pad_id, at::kLong);
  b.rows.labels = at::full({R, T}, kIgnoredLabel, at::kLong);
  b.completion_tokens = at::empty({R}, at::kLong);
  b.records = at::empty({static_cast<int64_t>(records.size())}, at::kLong);
  for (int64_t r = 0; r < R; ++r) {
    const Sequence& s = rows[static_cast<size_t>(r)];
    int64_t* inputs = b.rows.inputs.data_ptr<int64_t>() + r * T;
    int64_t* labels = b.rows.labels.data_ptr<int64_t>() + r * T;
    int64_t completion = 0;
    for (size_t t = 0; t < s.ids.size(); ++t) {
      completion += s.completion[t];
      if (t + 1 < s.ids.size()) inputs[t] = s.ids[t];
      if (t > 0 && s.completion[t]) labels[t - 1] = s.ids[t];
    }
    b.completion_tokens.data_ptr<int64_t>()[r] = completion;
  }
  std::copy(records.begin(), records.end(), b.records.data_ptr<int64_t>());
  return b;
}

}  // namespace titan::data
