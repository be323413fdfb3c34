// The restricted unpickler of DCP checkpoints (checkpoint/restricted_unpickler.h) and the
// torch.save archive reader on arbitrary bytes: the first byte picks what the rest is (0 a
// non-tensor item's pickle, 1 a .metadata pickle, 2 a tensor's data.pkl, 3 a whole item archive,
// whose data.pkl is then read). Each either throws titan::Error or returns values whose records
// lie inside the input and whose containers nest no deeper than the limit.
#include <cstdint>
#include <functional>

#include "fuzz_input.h"
#include "titan/checkpoint/restricted_unpickler.h"
#include "titan/checkpoint/torch_save_archive.h"
#include "titan/common/error.h"

namespace {

using titan::checkpoint::pickle::Value;

// Every value reachable from `v`, depth-first; the unpickler refuses cycles, so this ends.
int depth_of(const Value& v) {
  int deepest = 0;
  for (const auto& item : v.items) deepest = std::max(deepest, 1 + depth_of(*item));
  for (const auto& [key, value] : v.entries)
    deepest = std::max({deepest, 1 + depth_of(*key), 1 + depth_of(*value)});
  return deepest;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using titan::fuzz::require;
  namespace pickle = titan::checkpoint::pickle;
  if (size < 1) return 0;
  const uint8_t kind = data[0] % 4;
  const uint8_t* rest = data + 1;
  const size_t n = size - 1;
  try {
    if (kind == 3) {
      const auto records = titan::checkpoint::read_torch_save_archive(rest, n, "fuzz.distcp");
      for (const auto& [name, record] : records)
        require(record.data >= rest && record.size <= n && record.data + record.size <= rest + n);
      auto pkl = records.find("data.pkl");
      if (pkl == records.end()) return 0;
      const pickle::ValuePtr v = pickle::unpickle(pkl->second.data, pkl->second.size,
                                                  pickle::Admits::kTensor, "fuzz/data.pkl");
      require(depth_of(*v) <= 101);
      return 0;
    }
    const pickle::Admits admits = kind == 0   ? pickle::Admits::kPlainData
                                  : kind == 1 ? pickle::Admits::kDcpMetadata
                                              : pickle::Admits::kTensor;
    const pickle::ValuePtr v = pickle::unpickle(rest, n, admits, "fuzz.pkl");
    require(v != nullptr && depth_of(*v) <= 101);
  } catch (const titan::Error&) {
  }
  return 0;
}
