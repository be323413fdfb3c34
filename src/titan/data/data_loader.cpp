#include "titan/data/data_loader.h"

#include <chrono>
#include <vector>

#include "titan/common/error.h"

namespace titan::data {
namespace {

constexpr int64_t kIgnoredLabel = -100;

}  // namespace

DataLoader::DataLoader(std::shared_ptr<const Tokenizer> tok, const std::string& dataset_path,
                       const LoaderOptions& options)
    : stream_(open_token_documents(dataset_path, std::move(tok), options.eos_id, options.text_field,
                                   options.chat_template),
              /*rank=*/0, /*world=*/1, options.shuffle_seed, options.exchange,
              // A round of shared reading: what the ranks consume in one pass of their rows.
              options.row_ranks * options.local_batch_size * (options.seq_len + 1)),
      options_(options),
      dataset_path_(dataset_path),
      next_(stream_.position()) {
  TITAN_CHECK(options.local_batch_size >= 1, "training.local_batch_size must be >= 1, got ",
              options.local_batch_size);
  TITAN_CHECK(options.seq_len >= 1, "training.seq_len must be >= 1, got ", options.seq_len);
  TITAN_CHECK(options.prefetch >= 0, "training.prefetch_batches must be >= 0, got ",
              options.prefetch);
  TITAN_CHECK(
      options.row_ranks >= 1 && options.row_rank >= 0 && options.row_rank < options.row_ranks,
      "data loader: row rank ", options.row_rank, " of ", options.row_ranks);
  TITAN_CHECK(!options.shift_within_documents || options.document_masking,
              "data loader: shifting within documents needs document masking");
  documents_read_ = stream_.documents_read();
}

DataLoader::DataLoader(std::shared_ptr<const Tokenizer> tok, const std::string& dataset_path,
                       int64_t local_batch_size, int64_t seq_len, int32_t eos_id,
                       const std::string& text_field)
    : DataLoader(std::move(tok), dataset_path, [&] {
        LoaderOptions o;
        o.local_batch_size = local_batch_size;
        o.seq_len = seq_len;
        o.eos_id = eos_id;
        o.text_field = text_field;
        return o;
      }()) {}

// The prefetch thread uses stream_: it must stop before the members go.
DataLoader::~DataLoader() { prefetcher_.reset(); }

DataLoader::Prepared DataLoader::prepare() {
  const int64_t B = options_.local_batch_size, S = options_.seq_len;
  const bool masking = options_.document_masking;
  const bool sft = options_.chat_template != nullptr;
  Prepared out;
  Batch& b = out.batch;
  b.inputs = at::empty({B, S}, at::kLong);
  b.labels = at::empty({B, S}, at::kLong);
  if (masking) {
    b.positions = at::empty({B, S}, at::kLong);
    b.document_ids = at::empty({B, S}, at::kLong);
  }
  const bool pairs = options_.shift_within_documents;
  // What a row takes of the stream: seq_len + 1 tokens, or seq_len pairs.
  const int64_t row_units = pairs ? S : S + 1;
  const auto skip_rows = [&](int64_t rows) {
    pairs ? stream_.skip_pairs(rows * row_units) : stream_.skip(rows * row_units);
  };
  std::vector<int64_t> window(S + 1);
  // starts[i] / trainable[i]: of window token i, or of pair i (and its label) when shifting.
  std::vector<uint8_t> starts(S + 1, 0), trainable(S + 1);
  // The rows of the ranks before this one in the run of row_ranks local batches.
  skip_rows(options_.row_rank * B);
  for (int64_t row = 0; row < B; ++row) {
    int64_t* inputs = b.inputs.data_ptr<int64_t>() + row * S;
    int64_t* labels = b.labels.data_ptr<int64_t>() + row * S;
    if (pairs) {
      stream_.read_pairs(S, inputs, labels, starts.data(), sft ? trainable.data() : nullptr);
      starts[S] = 0;  // nothing after the row: no label to ignore below
      if (sft) {
        for (int64_t i = 0; i < S; ++i)
          if (!trainable[i]) labels[i] = kIgnoredLabel;
      }
    } else {
      stream_.read(S + 1, window.data(), masking ? starts.data() : nullptr,
                   sft ? trainable.data() : nullptr);
      std::copy_n(window.begin(), S, inputs);
      std::copy_n(window.begin() + 1, S, labels);
      if (sft) {
        for (int64_t i = 0; i < S; ++i)
          if (!trainable[i + 1]) labels[i] = kIgnoredLabel;
      }
    }
    if (!masking) continue;
    int64_t* positions = b.positions.data_ptr<int64_t>() + row * S;
    int64_t* documents = b.document_ids.data_ptr<int64_t>() + row * S;
    int64_t document = 0, position = 0;
    for (int64_t i = 0; i < S; ++i) {
      if (i > 0 && starts[i]) {
        ++document;
        position = 0;
      }
      positions[i] = position++;
      documents[i] = document;
      // The label that would predict the next document's first token (none when shifting
      // within documents: no pair crosses).
      if (!pairs && starts[i + 1]) labels[i] = kIgnoredLabel;
    }
  }
  // And those after it.
  skip_rows((options_.row_ranks - 1 - options_.row_rank) * B);
  out.after = stream_.position();
  {
    std::lock_guard<std::mutex> lock(read_count_mutex_);
    documents_read_ = stream_.documents_read();
  }
  return out;
}

int64_t DataLoader::documents_read() const {
  std::lock_guard<std::mutex> lock(read_count_mutex_);
  return documents_read_;
}

Batch DataLoader::next() {
  const auto start = std::chrono::steady_clock::now();
  Prepared p;
  if (options_.prefetch == 0) {
    p = prepare();
  } else {
    if (!prefetcher_) {
      prefetcher_ = std::make_unique<Prefetcher<Prepared>>(
          [this] { return prepare(); }, static_cast<size_t>(options_.prefetch),
          /*fill_before_stopping=*/options_.exchange && options_.exchange->size() > 1);
    }
    p = prefetcher_->next();
  }
  next_ = p.after;
  waited_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return std::move(p.batch);
}

nlohmann::json DataLoader::state() const {
  nlohmann::json s = {{"epoch", next_.epoch},
                      {"document", next_.document},
                      {"offset", next_.offset},
                      {"dataset_path", dataset_path_}};
  if (options_.shuffle_seed) s["shuffle_seed"] = *options_.shuffle_seed;
  if (options_.shift_within_documents) s["packing"] = "torchtitan";
  return s;
}

void DataLoader::load_state(const nlohmann::json& s) {
  const auto get = [&](const char* key) -> int64_t {
    TITAN_CHECK(s.is_object() && s.contains(key) && s[key].is_number_integer(),
                "dataloader state lacks the integer field '", key, "'");
    return s[key].get<int64_t>();
  };
  // Older checkpoints record the stream's document striding, which was always one rank.
  if (s.is_object() && s.contains("dp_world"))
    TITAN_CHECK(get("dp_rank") == 0 && get("dp_world") == 1, "dataloader state was saved by a ",
                "stream of rank ", get("dp_rank"), " of ", get("dp_world"),
                ", which titan no longer reads");
  const bool saved_shuffled = s.contains("shuffle_seed");
  const auto describe = [](bool shuffled, uint64_t seed) {
    return shuffled ? "shuffled with seed " + std::to_string(seed) : std::string("not shuffled");
  };
  const uint64_t saved_seed = saved_shuffled ? s["shuffle_seed"].get<uint64_t>() : 0;
  TITAN_CHECK(saved_shuffled == options_.shuffle_seed.has_value() &&
                  saved_seed == options_.shuffle_seed.value_or(0),
              "dataloader state was saved ", describe(saved_shuffled, saved_seed),
              " but this run is ",
              describe(options_.shuffle_seed.has_value(), options_.shuffle_seed.value_or(0)),
              "; resume with the same training.shuffle and training.seed");
  // A position counts tokens or, shifting within documents, pairs: the same packing only.
  const std::string saved_packing =
      s.contains("packing") && s["packing"].is_string() ? s["packing"].get<std::string>() : "";
  const std::string packing = options_.shift_within_documents ? "torchtitan" : "";
  TITAN_CHECK(saved_packing == packing, "dataloader state was saved with training.packing ",
              saved_packing.empty() ? "megatron or hf_flattening" : saved_packing,
              " but this run packs with ", packing.empty() ? "megatron or hf_flattening" : packing,
              "; resume with the same training.packing, or with --checkpoint.exclude_from_loading "
              "dataloader to read the data from its start");
  // Batches prepared ahead belong to the old position: stop the thread before seeking.
  prefetcher_.reset();
  try {
    stream_.seek({get("epoch"), get("document"), get("offset")});
  } catch (const DataReadError&) {
    throw;
  } catch (const Error& e) {
    // The likely cause, when the run reads another dataset now: say which.
    const std::string saved = s.contains("dataset_path") && s["dataset_path"].is_string()
                                  ? s["dataset_path"].get<std::string>()
                                  : std::string();
    if (saved.empty() || saved == dataset_path_) throw;
    fail("the checkpoint's data position was saved reading ", saved, ", not ", dataset_path_, ": ",
         e.what());
  }
  next_ = stream_.position();
}

std::string DataLoader::load_torchtitan_position(int64_t world_size, int64_t sample_idx,
                                                 int64_t epoch,
                                                 const std::vector<int64_t>& inputs_buffer,
                                                 const std::vector<int64_t>& labels_buffer) {
  // torchtitan splits the documents between its data ranks (datasets' split_dataset_by_node),
  // titan the rows of each batch: one rank each is the only layout both read alike.
  if (world_size != 1 || options_.row_ranks != 1)
    return "torchtitan read with " + std::to_string(world_size) +
           " data-parallel ranks and this run with " + std::to_string(options_.row_ranks) +
           ", which split the documents otherwise";
  if (!options_.shift_within_documents) return "this run's training.packing is not torchtitan";
  if (options_.shuffle_seed) return "training.shuffle orders this run's documents otherwise";
  if (epoch != 0)
    return "torchtitan was in epoch " + std::to_string(epoch) +
           ", whose order (datasets' shuffle) titan does not reproduce";
  if (inputs_buffer.size() != labels_buffer.size()) return "its input and label buffers differ";
  const int64_t documents = stream_.documents().size();
  if (sample_idx < 0 || sample_idx > documents)
    return "it had read " + std::to_string(sample_idx) + " documents, and " + dataset_path_ +
           " holds " + std::to_string(documents);
  if (sample_idx == documents && inputs_buffer.empty())
    return "it had read the whole dataset (torchtitan's next epoch is shuffled)";
  prefetcher_.reset();  // batches prepared ahead belong to the old position
  const StreamPosition before = next_;
  // The buffered pairs are the last pairs of the documents read: walk back over those.
  StreamPosition at{0, sample_idx, 0};
  int64_t remaining = static_cast<int64_t>(inputs_buffer.size());
  while (remaining > 0) {
    if (--at.document < 0) {
      stream_.seek(before);
      return "its buffers hold more pairs than the documents it had read";
    }
    stream_.seek({0, at.document, 0});
    const int64_t pairs = std::max<int64_t>(stream_.document_tokens() - 1, 0);
    at.offset = std::max<int64_t>(pairs - remaining, 0);
    remaining -= pairs - at.offset;
  }
  if (!inputs_buffer.empty()) {
    // The same dataset and tokenizer give those very tokens there.
    stream_.seek(at);
    std::vector<int64_t> inputs(inputs_buffer.size()), labels(labels_buffer.size());
    stream_.read_pairs(static_cast<int64_t>(inputs.size()), inputs.data(), labels.data());
    if (inputs != inputs_buffer || labels != labels_buffer) {
      stream_.seek(before);
      return "the " + std::to_string(inputs_buffer.size()) +
             " token pairs torchtitan had buffered are not what " + dataset_path_ +
             " gives there (another dataset or tokenizer)";
    }
  }
  stream_.seek(at);
  next_ = stream_.position();
  return "";
}

}  // namespace titan::data
