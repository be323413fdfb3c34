// The token shard reader (titan/data/token_shard_format.h) on arbitrary bytes: it either
// throws titan::Error or gives documents that are non-empty and add up to the token count.
#include <cstdint>
#include <vector>

#include "fuzz_input.h"
#include "titan/common/error.h"
#include "titan/data/token_shard_format.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using titan::fuzz::require;
  try {
    const titan::data::TokenShardView view("fuzz.bin", data, size);
    std::vector<int32_t> ids;
    for (int64_t i = 0; i < view.documents(); ++i) {
      const size_t before = ids.size();
      view.append_document(i, ids);
      require(ids.size() > before);
    }
    require(static_cast<int64_t>(ids.size()) == view.tokens());
  } catch (const titan::Error&) {
  }
  return 0;
}
