// titan eval --model HF_DIR_OR_CHECKPOINT --data FILE [--seq-len N --steps K]
#include <ATen/core/grad_mode.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "titan/cli/commands.h"
#include "titan/cli/model_source.h"
#include "titan/common/error.h"
#include "titan/data/data_loader.h"
#include "titan/data/token_documents.h"
#include "titan/data/tokenizer/tokenizer.h"
#include "titan/train/batch_loss.h"
#include "titan/train/loader_options.h"
#include "titan/train/loss.h"
#include "titan/train/precision.h"
#include "titan/train/run_warnings.h"

namespace titan::cli {
namespace {

constexpr const char* kHelp =
    R"(usage: titan eval --model HF_DIR_OR_CHECKPOINT --data FILE [--seq-len 512] [--steps 8]
                  [--batch-size 1] [--tokenizer DIR] [--eos-token "<|endoftext|>"] [--device auto|cpu|cuda]
                  [--text-field text] [--document-masking]

Mean token loss of a model on a dataset (.jsonl with a "text" field, or .txt), packed exactly
as training packs it (documents joined by the eos token, windows of seq-len + 1 tokens, labels
shifted by one), over `steps` batches. Prints {"loss": mean token loss, "tokens": count}. Data
shorter than steps x batch-size x (seq-len + 1) tokens is evaluated once, to its end (a warning
gives the count), never repeated.
--document-masking packs as training.document_masking does: block-causal attention, positions
restarting at each document, the label that crosses into the next document ignored.
)";

// The tokens (each document's ids and its eos) of one pass over `path`, counted up to `limit`.
int64_t tokens_up_to(const std::string& path, const std::shared_ptr<const data::Tokenizer>& tok,
                     const data::LoaderOptions& o, int64_t limit) {
  const std::unique_ptr<data::TokenDocuments> documents =
      data::open_token_documents(path, tok, o.eos_id, o.text_field);
  int64_t tokens = 0;
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < documents->size() && tokens < limit; ++i) {
    documents->read(i, ids);
    tokens += static_cast<int64_t>(ids.size());
  }
  return std::min(tokens, limit);
}

}  // namespace

int run_eval(const Args& args) {
  if (wants_help(args)) {
    std::cout << kHelp;
    return 0;
  }
  const FlagParser flags(args, "eval",
                         {"--model", "--data", "--seq-len", "--steps", "--batch-size",
                          "--tokenizer", "--eos-token", "--device", "--text-field"},
                         {"--document-masking"});
  const int64_t seq_len = flags.get_int("--seq-len", 512);
  const int64_t steps = flags.get_int("--steps", 8);
  const int64_t batch_size = flags.get_int("--batch-size", 1);
  TITAN_CHECK(seq_len >= 1 && steps >= 1 && batch_size >= 1,
              "titan eval: --seq-len, --steps and --batch-size must be positive");
  models::BuildOptions options;
  options.device = train::resolve_device(flags.get("--device", "auto"));
  LoadedModel loaded = load_model(flags.require("--model"), options);
  const std::string tokenizer_dir = flags.get("--tokenizer", loaded.tokenizer_dir);
  TITAN_CHECK(!tokenizer_dir.empty(), "titan eval: no tokenizer.json next to the model; pass ",
              "--tokenizer DIR");
  auto tokenizer =
      std::make_shared<const data::Tokenizer>(data::Tokenizer::from_directory(tokenizer_dir));
  data::LoaderOptions loader_options;
  loader_options.local_batch_size = batch_size;
  loader_options.seq_len = seq_len;
  loader_options.eos_id = tokenizer->token_to_id(flags.get("--eos-token", "<|endoftext|>"));
  loader_options.text_field = flags.get("--text-field", "text");
  loader_options.document_masking = flags.has("--document-masking");
  const std::string data_path = flags.require("--data");
  if (auto w = train::seq_len_warning(seq_len, loaded.model->hf_config("float32"), "--seq-len"))
    train::print_warning(*w);
  // Tokens of one pass over the data, up to what the steps take: the loader would start over.
  const int64_t window = seq_len + 1;
  const int64_t wanted = steps * batch_size * window;
  const int64_t available = tokens_up_to(data_path, tokenizer, loader_options, wanted);
  if (available < wanted) {
    train::print_warning("--data " + data_path + " holds " + std::to_string(available) +
                         " tokens, fewer than --steps " + std::to_string(steps) +
                         " x --batch-size " + std::to_string(batch_size) + " x (--seq-len " +
                         std::to_string(seq_len) + " + 1) = " + std::to_string(wanted) +
                         ": evaluated once, to the end of the data");
  }
  const int64_t batches = (available + batch_size * window - 1) / (batch_size * window);
  data::DataLoader loader(tokenizer, data_path, loader_options);

  const train::CausalLmLoss loss(*loaded.model, /*overrides=*/nullptr);
  at::NoGradGuard no_grad;
  double loss_sum = 0;
  int64_t tokens = 0;
  for (int64_t i = 0; i < batches; ++i) {
    data::Batch batch = loader.next();
    if (available < wanted) {
      // Window w's label j is token w * window + j + 1 of the stream: past the data, it is the
      // start of the data again.
      const at::Tensor rows = at::arange(i * batch_size, (i + 1) * batch_size, at::kLong);
      const at::Tensor target = rows.unsqueeze(1) * window + at::arange(1, seq_len + 1, at::kLong);
      batch.labels = batch.labels.masked_fill(target >= available, -100);
    }
    const train::BatchLoss b = train::batch_loss(*loaded.model, loss, batch, options.device);
    loss_sum += b.loss_sum.item<double>();
    tokens += b.tokens;
  }
  TITAN_CHECK(tokens > 0, "titan eval: --data ", data_path, " holds ", available,
              " tokens: no label to evaluate (it needs at least 2)");
  std::cout << nlohmann::json{{"loss", loss_sum / double(tokens)}, {"tokens", tokens}}.dump()
            << std::endl;
  return 0;
}

}  // namespace titan::cli
