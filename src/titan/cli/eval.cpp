// titan eval --model HF_DIR_OR_CHECKPOINT --data FILE [--seq-len N --steps K]
#include <ATen/core/grad_mode.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "titan/cli/commands.h"
#include "titan/cli/model_source.h"
#include "titan/common/error.h"
#include "titan/data/data_loader.h"
#include "titan/data/tokenizer/tokenizer.h"
#include "titan/train/loader_options.h"
#include "titan/train/loss.h"
#include "titan/train/precision.h"

namespace titan::cli {
namespace {

constexpr const char* kHelp =
    R"(usage: titan eval --model HF_DIR_OR_CHECKPOINT --data FILE [--seq-len 512] [--steps 8]
                  [--batch-size 1] [--tokenizer DIR] [--eos-token "<|endoftext|>"] [--device auto|cpu|cuda]
                  [--text-field text] [--document-masking]

Mean token loss of a model on a dataset (.jsonl with a "text" field, or .txt), packed exactly
as training packs it (documents joined by the eos token, windows of seq-len + 1 tokens, labels
shifted by one), over `steps` batches. Prints {"loss": mean token loss, "tokens": count}.
--document-masking packs as training.document_masking does: block-causal attention, positions
restarting at each document, the label that crosses into the next document ignored.
)";

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
  data::DataLoader loader(tokenizer, flags.require("--data"), loader_options);

  const train::CausalLmLoss loss(*loaded.model, /*overrides=*/nullptr);
  at::NoGradGuard no_grad;
  double loss_sum = 0;
  int64_t tokens = 0;
  for (int64_t i = 0; i < steps; ++i) {
    const data::Batch batch = loader.next();
    const at::Tensor labels = batch.labels.to(options.device).flatten();
    const at::Tensor hidden = loaded.model
                                  ->forward_packed(batch.inputs.to(options.device),
                                                   train::packed_documents(batch, options.device))
                                  .hidden;
    loss_sum += loss.sum(hidden.flatten(0, 1), labels).item<double>();
    tokens += train::count_valid_tokens(labels);
  }
  std::cout << nlohmann::json{{"loss", loss_sum / double(tokens)}, {"tokens", tokens}}.dump()
            << std::endl;
  return 0;
}

}  // namespace titan::cli
