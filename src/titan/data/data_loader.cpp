#include "titan/data/data_loader.h"

#include <vector>

#include "titan/common/error.h"

namespace titan::data {

DataLoader::DataLoader(std::shared_ptr<const Tokenizer> tok, const std::string& dataset_path,
                       int64_t local_batch_size, int64_t seq_len, int32_t eos_id, int64_t dp_rank,
                       int64_t dp_world, const std::string& text_field)
    : stream_(open_token_documents(dataset_path, std::move(tok), eos_id, text_field), dp_rank,
              dp_world),
      local_batch_size_(local_batch_size),
      seq_len_(seq_len),
      dp_rank_(dp_rank),
      dp_world_(dp_world),
      dataset_path_(dataset_path) {
  TITAN_CHECK(local_batch_size >= 1, "training.local_batch_size must be >= 1, got ",
              local_batch_size);
  TITAN_CHECK(seq_len >= 1, "training.seq_len must be >= 1, got ", seq_len);
}

Batch DataLoader::next() {
  Batch b;
  b.inputs = at::empty({local_batch_size_, seq_len_}, at::kLong);
  b.labels = at::empty({local_batch_size_, seq_len_}, at::kLong);
  std::vector<int64_t> window(seq_len_ + 1);
  int64_t* inputs = b.inputs.data_ptr<int64_t>();
  int64_t* labels = b.labels.data_ptr<int64_t>();
  for (int64_t row = 0; row < local_batch_size_; ++row) {
    stream_.read(seq_len_ + 1, window.data());
    std::copy_n(window.begin(), seq_len_, inputs + row * seq_len_);
    std::copy_n(window.begin() + 1, seq_len_, labels + row * seq_len_);
  }
  return b;
}

nlohmann::json DataLoader::state() const {
  const StreamPosition p = stream_.position();
  return {{"epoch", p.epoch},    {"document", p.document}, {"offset", p.offset},
          {"dp_rank", dp_rank_}, {"dp_world", dp_world_},  {"dataset_path", dataset_path_}};
}

void DataLoader::load_state(const nlohmann::json& s) {
  const auto get = [&](const char* key) -> int64_t {
    TITAN_CHECK(s.is_object() && s.contains(key) && s[key].is_number_integer(),
                "dataloader state lacks the integer field '", key, "'");
    return s[key].get<int64_t>();
  };
  TITAN_CHECK(get("dp_rank") == dp_rank_ && get("dp_world") == dp_world_,
              "dataloader state was saved by data-parallel rank ", get("dp_rank"), " of ",
              get("dp_world"), " but is loaded by rank ", dp_rank_, " of ", dp_world_,
              "; resume with the same data-parallel layout");
  stream_.seek({get("epoch"), get("document"), get("offset")});
}

}  // namespace titan::data
